"""The streaming source's view of a log dir without Spark: extents, ranges read by executors, bad input."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spark_jobs.layout import LayoutError, discover
from spark_jobs.read_options import parse_options
from spark_jobs.stream_log import TailScanner, offset_for_timestamp, snapshot
from spark_jobs.stream_offsets import DataLossError, DataLossPolicy
from spark_jobs.stream_source import OffsetRangeSplit, parse_stream_options, read_range
from storage.checkpoints import OffsetCheckpointFile
from tests.unit.spark.segment_files import BASE_TS, Expected, open_transaction_tail

LogDir = tuple[Path, list[Expected]]


def _offsets(split: OffsetRangeSplit, fail: bool = True, isolation: str = "read_committed") -> list[int]:
    options = parse_options({"path": split.directory, "isolation.level": isolation})
    return [o for batch in read_range(split, options, DataLossPolicy(fail)) for o in batch.column("offset").to_pylist()]


def test_extents_follow_the_checkpointed_high_watermark_and_open_transactions(log_dir: LogDir, tmp_path: Path) -> None:
    path, expected = log_dir
    copy = tmp_path / "logs"
    shutil.copytree(path, copy)
    (copy / "meta.properties").write_text("version=0\nbroker.id=0\n")
    scanner = TailScanner(track_transactions=True)
    ends = {e.offset for e in expected if (e.topic, e.partition) == ("txn", 0)}
    before = snapshot([str(copy)], None, scanner, read_committed=True).extents[("txn", 0)]
    assert before.readable_end == before.log_end > max(ends)
    open_transaction_tail(str(copy))
    after = snapshot([str(copy)], None, scanner, read_committed=True).extents[("txn", 0)]
    assert after.log_end == before.log_end + 3
    assert after.readable_end == before.readable_end  # the checkpoint has not moved, nor the LSO
    checkpoint = OffsetCheckpointFile(str(copy / "replication-offset-checkpoint"))
    checkpoint.write({**checkpoint.read(), ("txn", 0): after.log_end})
    # the high watermark passed the open transaction: read_committed still stops at its first offset
    assert snapshot([str(copy)], None, scanner, read_committed=True).extents[("txn", 0)].readable_end == before.log_end
    assert snapshot([str(copy)], None, TailScanner(False), read_committed=False).extents[
        ("txn", 0)].readable_end == after.log_end


def test_a_range_reads_committed_records_only(log_dir: LogDir) -> None:
    path, expected = log_dir
    wanted = sorted(e.offset for e in expected if (e.topic, e.partition) == ("txn", 0) and not e.aborted)
    split = OffsetRangeSplit("txn", 0, str(path / "txn-0"), wanted[3], wanted[-2])
    assert _offsets(split) == [o for o in wanted if wanted[3] <= o < wanted[-2]]


def test_a_range_whose_first_segment_was_deleted(log_dir: LogDir, tmp_path: Path) -> None:
    path, _expected = log_dir
    copy = tmp_path / "events-0"
    shutil.copytree(path / "events-0", copy)
    first, second = sorted(copy.glob("*.log"))[:2]
    first.unlink()
    split = OffsetRangeSplit("events", 0, str(copy), 0, 1_000)
    with pytest.raises(DataLossError, match=r"events-0: offsets 0 to \d+ were deleted before this micro-batch"):
        _offsets(split)
    assert _offsets(split, fail=False)[0] == int(second.name.split(".")[0])


def test_offset_for_timestamp(log_dir: LogDir) -> None:
    path, expected = log_dir
    replica = discover([str(path / "events-0")])[0]
    rows = sorted((e.offset, e.timestamp) for e in expected if (e.topic, e.partition) == ("events", 0))
    target = rows[40][1]
    assert offset_for_timestamp(replica, target, 10_000) == min(o for o, ts in rows if ts >= target)
    assert offset_for_timestamp(replica, BASE_TS + 10**12, 10_000) is None


def test_bad_input(log_dir: LogDir, tmp_path: Path) -> None:
    path, _expected = log_dir
    with pytest.raises(LayoutError, match=r"events-0: not a Kafka broker log dir"):
        parse_stream_options({"path": str(path / "events-0")})
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(LayoutError, match="elsewhere: not a Kafka broker log dir"):
        parse_stream_options({"path": str(tmp_path / "elsewhere")})
    with pytest.raises(ValueError, match="does not subscribe to: other"):
        parse_stream_options({"path": str(path), "topics": "events", "startingOffsets": '{"other": {"0": 1}}'})
    with pytest.raises(ValueError, match="endingoffsets is for batch reads"):
        parse_stream_options({"path": str(path), "endingOffsets": "latest"})
