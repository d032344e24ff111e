"""The kafka-log reader without Spark: planning splits and reading them, against what was written."""
from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path

import pytest

from protocol.records.batch import CRC_OFFSET
from spark_jobs.layout import LayoutError, discover
from spark_jobs import segment_reader
from spark_jobs.planner import usable_index_entries
from spark_jobs.segment_reader import CorruptSegmentError
from storage.checkpoints import OffsetCheckpointFile
from tests.unit.spark.segment_files import open_transaction_tail
from tests.unit.spark.spark_read_helpers import expected_view, read_direct, row_view


@pytest.fixture(params=["records", "columns"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test with either decoder: the fixture log's batches are too small for the columnar
    one, which here takes every v2 batch (those with headers still go record by record)."""
    if request.param == "columns":
        monkeypatch.setattr(segment_reader, "MIN_COLUMNAR_RECORDS", 1)


@pytest.mark.usefixtures("decoder")
@pytest.mark.parametrize("max_split_bytes", ["500", "2000", str(1 << 30)])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_reads_exactly_what_was_written(log_dir, isolation: str, max_split_bytes: str) -> None:
    path, expected = log_dir
    _splits, rows = read_direct({"path": str(path), "isolation.level": isolation, "maxSplitBytes": max_split_bytes})
    wanted = [e for e in expected if isolation == "read_uncommitted" or not e.aborted]
    assert sorted(row_view(r) for r in rows) == expected_view(wanted)
    assert len({(r["topic"], r["partition"], r["offset"]) for r in rows}) == len(rows)


@pytest.mark.usefixtures("decoder")
def test_batch_columns(log_dir) -> None:
    path, _expected = log_dir
    _splits, rows = read_direct({"path": str(path), "topics": "events"})
    idempotent = [r for r in rows if r["producerId"] in (1000, 1001)]
    assert len(idempotent) == 2 * 4 * 5 and all(r["compression"] == "lz4" for r in idempotent)
    assert {r["leaderEpoch"] for r in rows} == {0}
    for row in rows:
        assert row["batchBaseOffset"] <= row["offset"] and row["batchSizeBytes"] > 61


def test_segments_split_at_index_entries(log_dir) -> None:
    path, _expected = log_dir
    replica = next(r for r in discover([str(path)]) if r.topic == "events" and r.partition == 0)
    assert len(replica.segments) >= 3
    segment = replica.segments[0]
    splits, _rows = read_direct({"path": str(segment.path), "maxSplitBytes": "600"})
    assert len(splits) >= 3
    assert splits[0].start == 0 and splits[-1].end == segment.size
    assert all(a.end == b.start for a, b in zip(splits, splits[1:]))
    index_positions = {e.position for e in usable_index_entries(segment)}
    assert {s.start for s in splits[1:]} <= index_positions


@pytest.mark.usefixtures("decoder")
def test_offset_and_timestamp_windows(log_dir) -> None:
    path, expected = log_dir
    events0 = [e for e in expected if (e.topic, e.partition) == ("events", 0)]
    low, high = events0[50].offset, events0[200].offset
    _s, rows = read_direct({"path": str(path), "topics": "events",
                            "startingOffsets": json.dumps({"events": {"0": low}}),
                            "endingOffsets": json.dumps({"events": {"0": high, "1": 3}})})
    want = [e for e in expected if e.topic == "events" and
            ((e.partition == 0 and low <= e.offset < high) or (e.partition == 1 and e.offset < 3))]
    assert sorted(row_view(r) for r in rows) == expected_view(want)

    start_ts, end_ts = events0[10].timestamp, events0[20].timestamp
    _s, rows = read_direct({"path": str(path), "topics": "events", "startingTimestamp": str(start_ts),
                            "endingTimestamp": str(end_ts)})
    want = [e for e in expected if e.topic == "events" and start_ts <= e.timestamp < end_ts]
    assert want and sorted(row_view(r) for r in rows) == expected_view(want)


def test_topic_filters(log_dir) -> None:
    path, _expected = log_dir
    _s, rows = read_direct({"path": str(path), "topicPattern": "ev.*"})
    assert {r["topic"] for r in rows} == {"events"}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_committed_only_stops_at_high_watermark(log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    copy = _copy(path, tmp_path / "logs")
    checkpoint = OffsetCheckpointFile(str(copy / "replication-offset-checkpoint"))
    watermarks = checkpoint.read()
    watermarks[("events", 1)] = 100
    checkpoint.write(watermarks)
    _s, rows = read_direct({"path": str(copy), "topics": "events", "committedOnly": "true"})
    want = [e for e in expected if e.topic == "events" and (e.partition == 0 or e.offset < 100)]
    assert sorted(row_view(r) for r in rows) == expected_view(want)


def test_committed_only_needs_a_checkpoint_entry(log_dir) -> None:
    path, _expected = log_dir
    segment = discover([str(path)])[0].segments[0]
    with pytest.raises(LayoutError, match="committed-only needs the broker log dir"):
        read_direct({"path": segment.path, "committedOnly": "true"})


@pytest.mark.usefixtures("decoder")
def test_open_transaction(log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    copy = _copy(path, tmp_path / "logs")
    open_rows = open_transaction_tail(str(copy))
    txn = [e for e in expected if e.topic == "txn"]
    _s, rows = read_direct({"path": str(copy), "topics": "txn", "isolation.level": "read_committed"})
    assert sorted(row_view(r) for r in rows) == expected_view(e for e in txn if not e.aborted)
    _s, rows = read_direct({"path": str(copy), "topics": "txn"})
    assert sorted(row_view(r) for r in rows) == expected_view(txn + open_rows)


def test_most_complete_replica_is_read(log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    full = _copy(path, tmp_path / "broker-1")
    partial = _copy(path, tmp_path / "broker-0")
    replica = next(r for r in discover([str(partial)]) if (r.topic, r.partition) == ("events", 1))
    os.remove(replica.segments[-1].path)
    for order in ([partial, full], [full, partial]):
        _s, rows = read_direct({"paths": json.dumps([str(p) for p in order]), "topics": "events"})
        assert sorted(row_view(r) for r in rows) == expected_view(e for e in expected if e.topic == "events")
    chosen = {(r.topic, r.partition): r.log_dir for r in discover([str(partial), str(full)])}
    assert chosen[("events", 1)] == str(full)


def test_partition_dir_and_segment_paths(log_dir) -> None:
    path, expected = log_dir
    _s, rows = read_direct({"path": str(path / "legacy-0")})
    assert sorted(row_view(r) for r in rows) == expected_view(e for e in expected if e.topic == "legacy")
    segment = discover([str(path / "events-1")])[0].segments[1]
    _s, rows = read_direct({"path": f"file://{segment.path}"})
    assert rows and all(r["offset"] >= segment.base_offset for r in rows)
    with pytest.raises(LayoutError, match="no such file"):
        read_direct({"path": str(path / "missing")})


def _corrupt_second_batch(partition_dir: Path) -> tuple[Path, int]:
    segment = sorted(partition_dir.glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")
    data[second + CRC_OFFSET] ^= 0xFF
    segment.write_bytes(bytes(data))
    return segment, second


def test_corrupt_batch_fails_with_position_unless_skipped(log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    copy = _copy(path, tmp_path / "logs")
    segment, position = _corrupt_second_batch(copy / "events-0")
    with pytest.raises(CorruptSegmentError, match=f"{segment}.*byte position {position}.*CRC"):
        read_direct({"path": str(copy), "topics": "events"})
    _s, rows = read_direct({"path": str(copy), "topics": "events", "skipCorrupt": "true"})
    per_partition = collections.Counter(r["partition"] for r in rows)
    events = collections.Counter(e.partition for e in expected if e.topic == "events")
    assert per_partition[1] == events[1]
    assert per_partition[0] == events[0] - 7  # the second batch holds 7 records (NONE=6, GZIP=7)


def test_torn_tail_of_last_segment_is_ignored(log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    copy = _copy(path, tmp_path / "logs")
    replica = next(r for r in discover([str(copy)]) if r.topic == "legacy")
    with open(replica.segments[-1].path, "ab") as f:
        f.write(b"\x00" * 8 + (500).to_bytes(4, "big") + b"\x01" * 20)
    _s, rows = read_direct({"path": str(copy), "topics": "legacy"})
    assert sorted(row_view(r) for r in rows) == expected_view(e for e in expected if e.topic == "legacy")


GOLDEN_COUNTS = {
    ("invoice", 1): 99523,
    ("some-topic", 0): 9,
    ("__consumer_offsets", 16): 69,
    ("__consumer_offsets", 13): 3093,
    ("my-first-topic", 0): 11,
    ("_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey", 0): 14,
    ("_confluent-command", 0): 2,
    ("__consumer_offsets", 29): 78,
    ("docker-connect-status", 0): 135,
    ("_schemas", 0): 63,
    ("test10", 0): 8,
}


@pytest.mark.usefixtures("decoder")
def test_golden_logs(golden: Path) -> None:
    _s, rows = read_direct({"paths": json.dumps([str(p) for p in sorted(golden.iterdir()) if p.is_dir()]),
                            "maxSplitBytes": "250000"})
    assert collections.Counter((r["topic"], r["partition"]) for r in rows) == GOLDEN_COUNTS
    invoice = sorted(r["offset"] for r in rows if r["topic"] == "invoice")
    assert invoice == list(range(99523))
    snappy = [r for r in rows if r["topic"] == "some-topic"]
    assert {r["compression"] for r in snappy} == {"snappy"}
    assert all([h["key"] for h in r["headers"]] == ["__Key_TypeId__"] for r in snappy)
    rekey = [r for r in rows if r["topic"].startswith("_confluent-controlcenter")]
    assert {(r["compression"], r["timestampType"]) for r in rekey} == {("lz4", 1)}
    tombstones = [r for r in rows if r["topic"] == "__consumer_offsets" and r["partition"] == 29 and r["value"] is None]
    assert len(tombstones) == 1
    first = next(r for r in rows if r["topic"] == "invoice" and r["offset"] == 0)
    assert len(first["key"]) == 4  # IntegerSerializer keys
    assert first["value"].startswith(b"Simple Message-")


def test_segment_without_index_is_split_by_scanning(golden: Path) -> None:
    segment = golden / "lj-invoice-3seg" / "invoice-1" / "00000000000000090748.log"
    assert not segment.with_suffix(".index").exists()
    splits, rows = read_direct({"path": str(segment), "maxSplitBytes": "100000"})
    assert len(splits) >= 3 and all(a.end == b.start for a, b in zip(splits, splits[1:]))
    assert sorted(r["offset"] for r in rows) == list(range(90748, 99523))
