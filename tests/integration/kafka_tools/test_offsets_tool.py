"""kafka-get-offsets.sh (--time -1, -2, -3 and a timestamp) and kafka-delete-records.sh against our
broker and real Kafka, on the same batches with known timestamps."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.kafka_tools.tool_support import SideBySide, timed_batch, unique

pytestmark = pytest.mark.integration

T0 = 1_600_000_000_000
# Ten records a second apart in two batches, but offset 6 carries the largest timestamp.
TIMESTAMPS = [T0 + 1000 * i for i in range(10)]
TIMESTAMPS[6] = T0 + 60_000


def _topic_with_records(sides: SideBySide, cleanup_policy: str = "delete") -> str:
    topic = unique("offsets")
    # Records from 2020: without retention.ms=-1 either broker may delete them mid-test.
    sides.create_topic(topic, configs={"retention.ms": "-1", "cleanup.policy": cleanup_policy})
    records = [(ts, f"k{i}".encode(), f"v{i}".encode()) for i, ts in enumerate(TIMESTAMPS)]
    sides.produce(topic, [timed_batch(records[:5]), timed_batch(records[5:], codec=1)])
    return topic


def _offsets(sides: SideBySide, *args: str) -> list[str]:
    return sides.same("kafka-get-offsets", ["--bootstrap-server", "{bootstrap}", *args]).lines()


def test_get_offsets_by_time(sides: SideBySide) -> None:
    topic = _topic_with_records(sides)
    assert _offsets(sides, "--topic", topic, "--time", "-1") == [f"{topic}:0:10"]  # latest
    assert _offsets(sides, "--topic", topic, "--time", "-2") == [f"{topic}:0:0"]   # earliest
    assert _offsets(sides, "--topic", topic, "--time", "-3") == [f"{topic}:0:6"]   # max timestamp
    assert _offsets(sides, "--topic", topic, "--time", str(T0 + 2500)) == [f"{topic}:0:3"]
    assert _offsets(sides, "--topic", topic, "--time", str(T0 + 7000)) == [f"{topic}:0:6"]
    assert _offsets(sides, "--topic", topic, "--time", str(T0 + 99_000)) == []
    assert _offsets(sides, "--topic-partitions", f"{topic}:0,{topic}:1-3") == [f"{topic}:0:10"]
    no_match = sides.same("kafka-get-offsets", ["--bootstrap-server", "{bootstrap}", "--topic", unique("none")],
                          stderr=True, ok=False)
    assert "Could not match any topic-partitions with the specified filters" in no_match.stdout + no_match.stderr


def _delete_records(sides: SideBySide, tmp_path: Path, topic: str, offset: int, name: str) -> str:
    plan = tmp_path / f"{name}.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": offset}], "version": 1}))
    outcome = sides.same("kafka-delete-records", ["--bootstrap-server", "{bootstrap}", "--offset-json-file", str(plan)],
                         stderr=True)
    return outcome.stdout + outcome.stderr


def test_delete_records(sides: SideBySide, tmp_path: Path) -> None:
    topic = _topic_with_records(sides)
    assert f"partition: {topic}-0\tlow_watermark: 4" in _delete_records(sides, tmp_path, topic, 4, "to-4")
    assert _offsets(sides, "--topic", topic, "--time", "-2") == [f"{topic}:0:4"]
    assert _offsets(sides, "--topic", topic, "--time", str(T0)) == [f"{topic}:0:4"]
    consumed = sides.same("kafka-console-consumer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                                     "--from-beginning", "--max-messages", "6", "--timeout-ms", "30000",
                                                     "--property", "print.offset=true"])
    assert consumed.lines() == [f"Offset:{i}\tv{i}" for i in range(4, 10)]
    assert "OffsetOutOfRangeException" in _delete_records(sides, tmp_path, topic, 11, "beyond")
    assert f"partition: {topic}-0\tlow_watermark: 10" in _delete_records(sides, tmp_path, topic, -1, "to-end")

    compacted = _topic_with_records(sides, cleanup_policy="compact")
    assert "PolicyViolationException" in _delete_records(sides, tmp_path, compacted, 2, "compacted")
