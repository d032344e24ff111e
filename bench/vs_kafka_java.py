"""Kafka's own Java perf tools (``../shared/kafka-cli``, 3.9) for bench/vs_kafka.py, and their output.

The tools run with kafka-run-class.sh's JVM defaults (G1, the server compiler), as users run
them, not with the test harness's quick-start settings; their heap is 512 MB.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from tests.harness.kafka_broker import KAFKA_JVM_PERFORMANCE_OPTS
from tests.harness.kafka_cli import KafkaCli

JAVA_ENV = {"KAFKA_JVM_PERFORMANCE_OPTS": KAFKA_JVM_PERFORMANCE_OPTS}
# kafka-producer-perf-test's summary: "... 326000.1 records/sec (31.09 MB/sec), ... 3 ms 50th, 9 ms 95th, 12 ms 99th, 20 ms 99.9th."
_PRODUCER_SUMMARY = re.compile(r"records sent, ([\d.]+) records/sec .* (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th, "
                               r"(\d+) ms 99.9th")
_E2E = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


class JavaTools:
    def __init__(self, work_dir: Path) -> None:
        self.cli = KafkaCli(work_dir, heap="-Xmx512m")

    def produce(self, bootstrap: str, topic: str, count: int, size: int, rate: float,
                props: Mapping[str, object]) -> tuple[float, float, float, float]:
        """kafka-producer-perf-test: records/s and the p50/p99/p99.9 ms it reports (whole ms);
        ``rate`` -1 is unthrottled."""
        done = self.cli.run("kafka-producer-perf-test", [
            "--topic", topic, "--num-records", str(count), "--record-size", str(size),
            "--throughput", str(int(rate)),
            "--producer-props", f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in props.items()),
        ], timeout=600, env=JAVA_ENV)
        match = _PRODUCER_SUMMARY.search(done.stdout)
        if match is None:
            raise RuntimeError(f"no summary in kafka-producer-perf-test's output:\n{done.stdout[-2000:]}")
        records_per_s, p50, p99, p999 = (float(g) for g in match.groups())
        return records_per_s, p50, p99, p999

    def consume(self, bootstrap: str, topic: str, count: int) -> float:
        """kafka-consumer-perf-test (a group consumer from the earliest offset): records/s while
        fetching, the group join excluded (its fetch.nMsg.sec)."""
        done = self.cli.run("kafka-consumer-perf-test", [
            "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
            "--timeout", "30000", "--hide-header",
        ], timeout=600, env=JAVA_ENV)
        fields = [f.strip() for f in done.stdout.strip().splitlines()[-1].split(",")]
        if len(fields) != 10 or int(fields[4]) < count:
            raise RuntimeError(f"kafka-consumer-perf-test consumed less than {count}:\n{done.stdout[-2000:]}")
        return float(fields[9])

    def end_to_end(self, bootstrap: str, topic: str, count: int, size: int) -> tuple[float, float, float]:
        """kafka-e2e-latency (acks=1): p50/p99/p99.9 ms (whole ms) of sending one record and
        receiving it, one at a time."""
        done = self.cli.run("kafka-e2e-latency", [bootstrap, topic, str(count), "1", str(size)],
                            timeout=300, env=JAVA_ENV)
        match = _E2E.search(done.stdout)
        if match is None:
            raise RuntimeError(f"no percentiles in kafka-e2e-latency's output:\n{done.stdout[-2000:]}")
        p50, p99, p999 = (float(g) for g in match.groups())
        return p50, p99, p999
