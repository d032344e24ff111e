"""kafka-broker-api-versions.sh lists exactly what we serve (and what we serve as Kafka 3.9 does);
the perf tests, kafka-e2e-latency and the verifiable producer and consumer (the tools Kafka's own
system tests drive) run against our broker, their reports and JSON events parsed and checked."""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from protocol.api_keys import API_SPECS, ApiKey
from protocol.messages import ApiVersionsRequest
from protocol.schema_sources import NEWER_THAN_3_9
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli
from tests.integration.kafka_tools.tool_support import SideBySide, create_topic, unique

pytestmark = pytest.mark.integration

# "[unusable: node too new]" for versions the tool's client does not know; none for keys it does not know
_API_LINE = re.compile(r"^\t(\w+)\((\d+)\): (?:(\d+) to (\d+)|(\d+))(?: \[(?:usable: \d+|unusable: [^\]]+)\])?,?$")
_UNSUPPORTED_LINE = re.compile(r"^\t(\w+)\((\d+)\): UNSUPPORTED,?$")


def _versions(tool_output: str) -> tuple[dict[int, tuple[int, int]], dict[int, str], set[int]]:
    """(api key -> (min, max) served, api key -> its line, keys printed UNSUPPORTED)."""
    served: dict[int, tuple[int, int]] = {}
    lines: dict[int, str] = {}
    unsupported: set[int] = set()
    for line in tool_output.splitlines():
        if match := _API_LINE.match(line):
            key = int(match.group(2))
            low, high = (match.group(3), match.group(4)) if match.group(3) else (match.group(5), match.group(5))
            served[key], lines[key] = (int(low), int(high)), line
        elif match := _UNSUPPORTED_LINE.match(line):
            unsupported.add(int(match.group(2)))
    return served, lines, unsupported


def test_broker_api_versions_lists_what_we_serve(sides: SideBySide) -> None:
    ours, kafka = sides.run("kafka-broker-api-versions", ["--bootstrap-server", "{bootstrap}"])
    assert ours.returncode == kafka.returncode == 0, ours.stderr
    assert ours.lines()[0] == kafka.lines()[0] == "BOOTSTRAP (id: 0 rack: null) -> ("
    served, our_lines, unsupported = _versions(ours.stdout)
    answer = sides.ours[0].request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="test", client_software_version="1"))
    assert served == {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    kafka_served, kafka_lines, kafka_unsupported = _versions(kafka.stdout)
    # Whatever we serve, we serve in Kafka 3.9's versions, except the APIs taken from Kafka 4.2
    # (KIP-848's and KIP-932's), which go further than 3.9's where 3.9 has them at all (4.2 dropped
    # the share APIs' early-access v0); the rest the tool calls UNSUPPORTED.
    newer = {int(key) for key, spec in API_SPECS.items() if f"{spec.name}Request" in NEWER_THAN_3_9}
    assert {key: our_lines[key] for key in served if key not in newer} == \
        {key: kafka_lines[key] for key in served if key not in newer}
    for key in newer & set(served) & set(kafka_served):
        assert served[key][1] > kafka_served[key][1], key
    assert unsupported == (set(kafka_lines) | kafka_unsupported) - set(served)


def _events(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_verifiable_producer_and_consumer(cli: KafkaCli, ours: BrokerProcess) -> None:
    topic, group = unique("verifiable"), unique("verifiable")
    create_topic([ours], topic, partitions=2)
    produced = _events(cli.run("kafka-verifiable-producer", [
        "--bootstrap-server", ours.bootstrap, "--topic", topic, "--max-messages", "200", "--acks", "-1",
        "--value-prefix", "7"]).stdout)
    assert [e["name"] for e in (produced[0], produced[-2], produced[-1])] == [
        "startup_complete", "shutdown_complete", "tool_data"]
    assert (produced[-1]["sent"], produced[-1]["acked"]) == (200, 200)
    acks = [e for e in produced if e["name"] == "producer_send_success"]
    assert sorted(int(e["value"].split(".")[1]) for e in acks) == list(range(200))
    for partition in {e["partition"] for e in acks}:  # each partition's offsets: 0, 1, 2, ...
        offsets = sorted(e["offset"] for e in acks if e["partition"] == partition)
        assert offsets == list(range(len(offsets)))

    consumed = _events(cli.run("kafka-verifiable-consumer", [
        "--bootstrap-server", ours.bootstrap, "--topic", topic, "--group-id", group,
        "--max-messages", "200"]).stdout)
    names = Counter(e["name"] for e in consumed)
    assert names["startup_complete"] == names["shutdown_complete"] == 1 and names["partitions_assigned"] >= 1
    records = [p for e in consumed if e["name"] == "records_consumed" for p in e["partitions"]]
    assert sum(p["count"] for p in records) == 200
    ends: dict[int, int] = {}
    for e in consumed:
        if e["name"] == "offsets_committed":
            assert e["success"] is True, e
            ends.update((o["partition"], o["offset"]) for o in e["offsets"])
    per_partition = Counter(e["partition"] for e in acks)
    assert ends == {p: n for p, n in per_partition.items()}


def test_perf_tools(cli: KafkaCli, ours: BrokerProcess) -> None:
    topic = unique("perf")
    create_topic([ours], topic, partitions=2)
    produced = cli.run("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", "3000", "--record-size", "200", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={ours.bootstrap}", "acks=all", "compression.type=lz4"])
    summary = produced.stdout.strip().splitlines()[-1]
    assert re.match(r"^3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", summary), summary

    consumed = cli.run("kafka-consumer-perf-test", [
        "--bootstrap-server", ours.bootstrap, "--topic", topic, "--messages", "3000", "--timeout", "30000"])
    header, row = consumed.stdout.strip().splitlines()[-2:]
    report = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in row.split(","))))
    assert int(report["data.consumed.in.nMsg"]) == 3000
    assert float(report["data.consumed.in.MB"]) == pytest.approx(3000 * 200 / 1024 / 1024, abs=0.001)

    latency = cli.run("kafka-e2e-latency", [ours.bootstrap, topic, "50", "all", "100"])
    assert re.search(r"^Avg latency: [\d.]+ ms$", latency.stdout, re.MULTILINE), latency.stdout
