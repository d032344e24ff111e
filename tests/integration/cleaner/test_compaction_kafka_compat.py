"""Byte compatibility of compacted logs with real Kafka 3.9, both ways, on one log dir:

1. our broker writes a key-update workload and cleans it; Kafka's kafka-dump-log --deep-iteration
   reads every cleaned segment;
2. a real Kafka broker (same broker id, ZooKeeper chroot and log dir) serves those segments,
   takes more updates and cleans the whole log with its own cleaner;
3. our broker serves the log Kafka cleaned; ``storage.dump`` and the Spark jobs read it, gaps and all.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.broker import REPO_ROOT, BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.kafka_cli import kafka_cli
from tests.harness.waiting import wait_for
from tests.integration.cleaner.compaction_support import (
    CODECS,
    COMPACTED,
    Workload,
    cleaner_checkpoint,
    log_dir_records,
    produce_key_updates,
    read_from_start,
    unique,
)

pytestmark = pytest.mark.integration

CLEANER = {"log.cleaner.backoff.ms": "100"}


def _segments(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def _active_segment_base(partition_dir: Path) -> int:
    return int(_segments(partition_dir)[-1].stem)


def _our_offsets(segments: list[Path]) -> list[int]:
    return log_dir_records(segments[0].parent)[0]


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _workload_round(bootstrap: str, topic: str, workload: Workload, rounds: int) -> None:
    for i, codec in enumerate(CODECS):
        produce_key_updates(bootstrap, topic, workload, keys=120, rounds=rounds, codec=codec,
                            tombstone_every=9 if codec == "gzip" else 0, idempotent=i % 2 == 1)
    produce_key_updates(bootstrap, topic, Workload(), keys=150, rounds=1, codec="none", prefix="tail")


def test_logs_cleaned_by_us_and_by_kafka_are_served_by_the_other(zk_connect: str, tmp_path: Path) -> None:
    kafka_broker_or_skip()
    topic = unique("compat")
    ours = BrokerProcess(zk_connect, 0, tmp_path, CLEANER)
    partition_dir = ours.log_dir / f"{topic}-0"
    kafka = KafkaJavaBroker(zk_connect, 0, tmp_path, CLEANER, log_dir=ours.log_dir)
    workload = Workload()
    try:
        # 1. written and cleaned by us
        ours.start()
        ours.create_topic(topic, configs=COMPACTED)
        _workload_round(ours.bootstrap, topic, workload, rounds=3)
        wait_for(lambda: cleaner_checkpoint(ours.log_dir, topic) >= workload.produced, "our cleaner", 60)
        served_by_us = read_from_start(ours.bootstrap, topic)
        assert ours.stop() == 0
        segments = _segments(partition_dir)
        dump = kafka_cli(tmp_path / "cli").run(
            "kafka-dump-log", ["--deep-iteration", "--print-data-log", "--files", ",".join(map(str, segments))])
        assert "Exception" not in dump.stdout + dump.stderr, dump.stderr[-2000:]
        dumped = [int(o) for o in re.findall(r"\| offset: (\d+) ", dump.stdout)]
        assert dumped == _our_offsets(segments) and len(dumped) < workload.produced

        # 2. served, written and cleaned by Kafka
        kafka.start()
        kafka.wait_for_leaders(topic, 1, 60)
        served_by_kafka = read_from_start(kafka.bootstrap, topic)
        assert served_by_kafka.offsets == served_by_us.offsets
        assert served_by_kafka.latest == served_by_us.latest and served_by_kafka.headers == served_by_us.headers
        before = served_by_us.offsets[-1] + 1
        _workload_round(kafka.bootstrap, topic, workload, rounds=2)
        # Kafka may clean in several passes: wait until everything below the active segment is clean,
        # so no pass runs between this read and the stop
        wait_for(lambda: f"cleaned log {topic}-0" in kafka.cleaner_log()
                 and cleaner_checkpoint(ours.log_dir, topic) > before
                 and cleaner_checkpoint(ours.log_dir, topic) == _active_segment_base(partition_dir),
                 "Kafka's cleaner", 90, interval=0.5)
        cleaned_by_kafka = read_from_start(kafka.bootstrap, topic)
        kafka.stop()
        kafka.process = None

        # 3. served by us again, read by storage.dump and the Spark jobs
        ours.start()
        ours.wait_for_leaders(topic, 1, 30)
        again = read_from_start(ours.bootstrap, topic)
        assert again.offsets == cleaned_by_kafka.offsets and again.latest == cleaned_by_kafka.latest
        assert {k: v for k, v in again.latest.items() if k.startswith(b"key-")} == workload.latest
        assert ours.stop() == 0
    finally:
        ours.kill()
        kafka.kill()
    segments = _segments(partition_dir)
    offsets = _our_offsets(segments)
    assert offsets != list(range(offsets[0], offsets[-1] + 1))  # Kafka's cleaning left gaps
    dumped = _run("-m", "storage.dump", "--deep-iteration", *map(str, segments))
    assert [int(o) for o in re.findall(r"\| offset: (\d+) ", dumped)] == offsets
    verified = _run("-m", "storage.dump", "--verify-index-only", *[str(p.with_suffix(".index")) for p in segments])
    assert "Mismatches" not in verified and "corrupt" not in verified.lower()
    out = tmp_path / "export"
    _run("-m", "spark_jobs.export", "--log-dirs", str(partition_dir), "--output", str(out), "--master", "local[1]",
         "--no-progress")
    import pyarrow.parquet as pq

    table = pq.read_table(out).to_pydict()
    assert sorted(table["offset"]) == offsets
    exported = {}
    for offset, key, value in sorted(zip(table["offset"], table["key"], table["value"])):
        exported[key] = value
    assert {k: v for k, v in exported.items() if k.startswith(b"key-")} == workload.latest
