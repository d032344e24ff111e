"""kafka-consumer-groups.sh against our broker and real Kafka: list, describe (offsets, members,
state), reset-offsets (dry run and execute, every kind of target), delete-offsets and delete; for
groups that consumed with the console consumer and for a group with a live member."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import DescribeGroupsRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.kafka_tools.tool_support import SideBySide, timed_batch, unique

pytestmark = pytest.mark.integration

PER_PARTITION = 5
T0 = int(time.time() * 1000) - 3_600_000  # within retention (Kafka's first check is 30 s after start)


@pytest.fixture(scope="module")
def topic(sides: SideBySide) -> str:
    """Two partitions of five records each, on both sides."""
    name = unique("groups")
    sides.create_topic(name, partitions=2)
    for partition in (0, 1):
        sides.produce(name, [timed_batch([(T0 + i, b"k", f"p{partition}-{i}".encode()) for i in range(PER_PARTITION)])],
                      partition)
    return name


@pytest.fixture
def group(sides: SideBySide, topic: str) -> str:
    """A group that consumed (and committed) all of ``topic`` and has no members left."""
    name = unique("group")
    sides.same("kafka-console-consumer", ["--bootstrap-server", "{bootstrap}", "--topic", topic, "--group", name,
                                          "--from-beginning", "--max-messages", str(2 * PER_PARTITION),
                                          "--timeout-ms", "30000"], sort=True)
    return name


def _groups(*args: str) -> list[str]:
    return ["--bootstrap-server", "{bootstrap}", *args]


def test_list_and_describe(sides: SideBySide, topic: str, group: str) -> None:
    sides.same("kafka-consumer-groups", _groups("--list"), only=group)
    # Columns are as wide as the longest group name, and each cluster has groups of other tests.
    listed = sides.same("kafka-consumer-groups", _groups("--list", "--state"), only=group, normalise=[(" +", " ")])
    assert listed.lines()[0].split() == [group, "Empty"]

    offsets = sides.same("kafka-consumer-groups", _groups("--describe", "--group", group))
    assert f"Consumer group '{group}' has no active members." in offsets.stderr
    rows = [line.split() for line in offsets.lines() if line.startswith(group)]
    assert sorted(rows) == [[group, topic, str(p), "5", "5", "0", "-", "-", "-"] for p in (0, 1)]

    state = sides.same("kafka-consumer-groups", _groups("--describe", "--group", group, "--state", "--verbose"))
    assert state.lines()[-1].split() == [group, "BOOTSTRAP", "(0)", "Empty", "0"]
    sides.same("kafka-consumer-groups", _groups("--describe", "--group", group, "--members", "--verbose"))
    missing = sides.same("kafka-consumer-groups", _groups("--describe", "--group", unique("no-such-group")))
    assert "does not exist" in missing.stdout


def test_reset_offsets(sides: SideBySide, topic: str, group: str) -> None:
    def reset(*how: str, execute: bool = True) -> dict[int, int]:
        outcome = sides.same("kafka-consumer-groups", _groups(
            "--reset-offsets", "--group", group, "--topic", topic, *how, "--execute" if execute else "--dry-run"),
            stderr=True)
        # GROUP TOPIC PARTITION NEW-OFFSET rows follow the header (after any clamping warning)
        cells = outcome.stdout.split()
        rows = cells[cells.index("NEW-OFFSET") + 1:]
        return {int(rows[i + 2]): int(rows[i + 3]) for i in range(0, len(rows), 4)}

    assert reset("--to-earliest", execute=False) == {0: 0, 1: 0}
    assert reset("--to-earliest") == {0: 0, 1: 0}
    assert reset("--shift-by", "100") == {0: 5, 1: 5}  # clamped to the end, with a warning
    assert reset("--to-datetime", "2000-01-01T00:00:00.000") == {0: 0, 1: 0}
    assert reset("--to-offset", "3") == {0: 3, 1: 3}
    assert reset("--shift-by", "1") == {0: 4, 1: 4}
    exported = sides.same("kafka-consumer-groups", _groups(
        "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-latest", "--dry-run", "--export"))
    assert exported.stdout.split() == [f"{topic},1,5"]
    described = sides.same("kafka-consumer-groups", _groups("--describe", "--group", group, "--offsets"))
    assert sorted(line.split()[2:6] for line in described.lines() if line.startswith(group)) == [
        ["0", "4", "5", "1"], ["1", "4", "5", "1"]]


def test_delete_offsets_then_groups(sides: SideBySide, topic: str, group: str) -> None:
    deleted = sides.same("kafka-consumer-groups", _groups("--delete-offsets", "--group", group, "--topic", topic))
    assert f"Request succeed for deleting offsets with topic {topic} group {group}" in deleted.stdout
    sides.same("kafka-consumer-groups", _groups("--delete-offsets", "--group", group, "--topic", unique("none")),
               stderr=True, ok=False)
    other = unique("group")
    sides.same("kafka-consumer-groups", _groups("--reset-offsets", "--group", other, "--topic", topic,
                                                "--to-earliest", "--execute"))
    gone = sides.same("kafka-consumer-groups", _groups("--delete", "--group", other))
    assert f"Deletion of requested consumer groups ('{other}') was successful." in gone.stdout
    again = sides.same("kafka-consumer-groups", _groups("--delete", "--group", other), ok=False)
    assert "GroupIdNotFoundException" in again.stdout


def _group_state(broker: BrokerProcess, group: str) -> str:
    described = broker.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group]))
    return described.groups[0].group_state


@pytest.fixture
def live_group(sides: SideBySide, topic: str) -> Iterator[str]:
    """A group with one console consumer running on each side."""
    group = unique("live")
    consumers: list[subprocess.Popen[str]] = []
    try:
        for side in (0, 1):
            consumers.append(sides.cli.popen("kafka-console-consumer", [
                "--bootstrap-server", sides.bootstrap(side), "--topic", topic, "--group", group,
                "--consumer-property", "client.id=live-client"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for side in (0, 1):
            broker = sides.side(side)[0]
            wait_for(lambda: _group_state(broker, group) == "Stable", f"{group} stable on {broker}", 60)
        yield group
    finally:
        for consumer in consumers:
            consumer.terminate()
            consumer.wait(30)


def test_a_group_with_a_live_member(sides: SideBySide, topic: str, live_group: str) -> None:
    members = sides.same("kafka-consumer-groups", _groups("--describe", "--group", live_group, "--members",
                                                          "--verbose"))
    row = [line.split() for line in members.lines() if line.startswith(live_group)]
    assert row == [[live_group, "live-client-UUID", "/127.0.0.1", "live-client", "2", "(0,1)"]]
    state = sides.same("kafka-consumer-groups", _groups("--describe", "--group", live_group, "--state"))
    assert state.lines()[-1].split() == [live_group, "BOOTSTRAP", "(0)", "range", "Stable", "1"]
    refused = sides.same("kafka-consumer-groups", _groups("--delete", "--group", live_group), ok=False)
    assert "GroupNotEmptyException" in refused.stdout
    inactive_only = sides.same("kafka-consumer-groups", _groups(
        "--reset-offsets", "--group", live_group, "--topic", topic, "--to-earliest", "--execute"), ok=False)
    assert "can only be reset if the group" in inactive_only.stdout
