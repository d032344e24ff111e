"""Truncation, recovery after unclean shutdown and stray files, at their boundaries."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from storage.log import Log
from storage.log_config import LogConfig
from storage_test_helpers import batch, config, offsets_in, open_log, read_all

BATCH_SIZE = len(batch(1))


def _log_with(path: Path, batches: int, cfg: LogConfig | None = None, epoch: int = 0) -> Log:
    log = open_log(path, cfg)
    for _ in range(batches):
        log.append_as_leader(batch(1), leader_epoch=epoch)
    return log


def _crash(log: Log) -> None:
    """Drop the log without closing it, as a SIGKILL would (indexes stay untrimmed)."""
    for segment in log.segments:
        segment.offset_index.close_handler()
        segment.time_index.close_handler()
        segment.log.close()


def test_truncate_to_inside_and_at_segment_boundaries(tmp_path: Path) -> None:
    cfg = config(segment_bytes=3 * BATCH_SIZE)
    log = _log_with(tmp_path / "t-0", 8, cfg)
    log.update_high_watermark(8)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert not log.truncate_to(8)  # at the log end: nothing to do
    assert log.truncate_to(7)
    assert log.log_end_offset == 7 and log.high_watermark == 7
    assert log.truncate_to(6)  # exactly a segment base: that segment becomes empty
    assert [s.base_offset for s in log.segments] == [0, 3, 6] and log.active_segment.size == 0
    assert log.truncate_to(4)
    assert [s.base_offset for s in log.segments] == [0, 3] and log.log_end_offset == 4
    log.append_as_leader(batch(1), leader_epoch=1)
    assert offsets_in(read_all(log)) == [0, 1, 2, 3, 4]
    assert log.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 4)]
    log.close()
    reopened = open_log(tmp_path / "t-0", cfg, had_clean_shutdown=True, recovery_point=5)
    assert reopened.log_end_offset == 5
    reopened.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = _log_with(tmp_path / "t-0", 5, epoch=2)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert [s.base_offset for s in log.segments] == [100] and log.leader_epoch_cache.epoch_entries() == []
    log.append_as_leader(batch(2), leader_epoch=3)
    assert offsets_in(read_all(log)) == [100, 101]
    log.truncate_to(50)  # below the first segment: restart there
    assert log.log_start_offset == 50 and log.log_end_offset == 50
    log.close()
    assert sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".log")) == ["00000000000000000050.log"]


def test_recovery_truncates_a_partial_tail_and_rebuilds_indexes(tmp_path: Path) -> None:
    cfg = config(index_interval_bytes=1)
    log = _log_with(tmp_path / "t-0", 10, cfg)
    _crash(log)
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(batch(1)[:40])  # a torn write
    assert (tmp_path / "t-0" / "00000000000000000000.index").stat().st_size == cfg.segment_index_bytes
    recovered = open_log(tmp_path / "t-0", cfg)
    assert recovered.log_end_offset == 10 and segment.stat().st_size == 10 * BATCH_SIZE
    index = recovered.active_segment.offset_index
    assert [index.entry(i) for i in range(index.entries)] == [(i, i * BATCH_SIZE) for i in range(1, 10)]
    recovered.append_as_leader(batch(1), leader_epoch=0)
    assert offsets_in(read_all(recovered)) == list(range(11))
    recovered.close()


def test_recovery_stops_at_a_flipped_byte_and_drops_later_segments(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = config(segment_bytes=4 * BATCH_SIZE)
    log = _log_with(tmp_path / "t-0", 10, cfg)
    _crash(log)
    first = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[2 * BATCH_SIZE + 65] ^= 0x01
    first.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        recovered = open_log(tmp_path / "t-0", cfg, recovery_point=0)
    assert recovered.log_end_offset == 2 and [s.base_offset for s in recovered.segments] == [0]
    assert any(f"{first} at byte position {2 * BATCH_SIZE}" in r.getMessage() for r in caplog.records)
    assert offsets_in(read_all(recovered)) == [0, 1]
    assert not (tmp_path / "t-0" / "00000000000000000004.log").exists()
    recovered.close()


def test_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    cfg = config(segment_bytes=4 * BATCH_SIZE)
    log = _log_with(tmp_path / "t-0", 10, cfg)
    _crash(log)
    # corrupt the first (flushed) segment: recovery from offset 8 does not look at it
    first = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[65] ^= 0x01
    first.write_bytes(bytes(data))
    recovered = open_log(tmp_path / "t-0", cfg, recovery_point=8)
    assert recovered.log_end_offset == 10 and recovered.log_start_offset == 0
    recovered.close()


def test_empty_active_segment_recovers_to_its_base(tmp_path: Path) -> None:
    cfg = config(segment_bytes=2 * BATCH_SIZE)
    log = _log_with(tmp_path / "t-0", 4, cfg)
    log.roll()
    _crash(log)
    recovered = open_log(tmp_path / "t-0", cfg)
    assert recovered.log_end_offset == 4 and recovered.active_segment.base_offset == 4
    assert recovered.active_segment.size == 0
    recovered.close()


def test_index_pointing_past_the_end_is_rebuilt_even_after_clean_shutdown(tmp_path: Path) -> None:
    cfg = config(index_interval_bytes=1, segment_bytes=5 * BATCH_SIZE)
    log = _log_with(tmp_path / "t-0", 7, cfg)
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    raw[-4:] = (10**6).to_bytes(4, "big")
    index.write_bytes(bytes(raw))
    reopened = open_log(tmp_path / "t-0", cfg, had_clean_shutdown=True, recovery_point=7)
    rebuilt = reopened.segments.first.offset_index  # type: ignore[union-attr]
    assert rebuilt.entry(rebuilt.entries - 1).position == 4 * BATCH_SIZE
    assert offsets_in(read_all(reopened)) == list(range(7))
    reopened.close()


def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    cfg = config(index_interval_bytes=1, segment_bytes=5 * BATCH_SIZE)
    log = _log_with(tmp_path / "t-0", 7, cfg)
    log.close()
    directory = tmp_path / "t-0"
    original = (directory / "00000000000000000000.index").read_bytes()
    original_time = (directory / "00000000000000000000.timeindex").read_bytes()
    os.remove(directory / "00000000000000000000.index")
    os.remove(directory / "00000000000000000000.timeindex")
    reopened = open_log(directory, cfg, had_clean_shutdown=True, recovery_point=7)
    reopened.close()
    assert (directory / "00000000000000000000.index").read_bytes() == original
    assert (directory / "00000000000000000000.timeindex").read_bytes() == original_time


def test_stray_deleted_cleaned_and_swap_files(tmp_path: Path) -> None:
    cfg = config(segment_bytes=2 * BATCH_SIZE)
    directory = tmp_path / "t-0"
    log = _log_with(directory, 6, cfg)
    log.close()
    # a compaction that died mid-swap: segment 2 was rewritten (identical content here) as a .swap
    (directory / "00000000000000000002.log.swap").write_bytes((directory / "00000000000000000002.log").read_bytes())
    (directory / "00000000000000000002.index.swap").write_bytes(b"junk")
    (directory / "00000000000000000099.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000004.log.cleaned").write_bytes(b"partial")
    (directory / "00000000000000000077.index").write_bytes(b"")  # orphan index
    reopened = open_log(directory, cfg, had_clean_shutdown=True, recovery_point=6)
    names = sorted(os.listdir(directory))
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".swap"))]
    assert "00000000000000000077.index" not in names
    assert [s.base_offset for s in reopened.segments] == [0, 2, 4]
    assert offsets_in(read_all(reopened)) == list(range(6))
    reopened.close()


def test_garbage_leader_epoch_checkpoint_is_rebuilt_from_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), leader_epoch=1)
    log.append_as_leader(batch(2), leader_epoch=4)
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_bytes(b"\x00garbage\n")
    reopened = open_log(tmp_path / "t-0", had_clean_shutdown=True, recovery_point=4)
    assert reopened.leader_epoch_cache.epoch_entries() == [(1, 0), (4, 2)]
    assert reopened.end_offset_for_epoch(1) == (1, 2)
    reopened.close()


def test_preallocated_segments_are_trimmed_on_close_and_recovered_after_crash(tmp_path: Path) -> None:
    cfg = config(preallocate="true", segment_bytes=10_000)
    directory = tmp_path / "t-0"
    log = _log_with(directory, 3, cfg)
    segment_file = directory / "00000000000000000000.log"
    assert segment_file.stat().st_size == 10_000 and log.active_segment.size == 3 * BATCH_SIZE
    log.close()
    assert segment_file.stat().st_size == 3 * BATCH_SIZE
    log = open_log(directory, cfg, had_clean_shutdown=True, recovery_point=3)
    log.append_as_leader(batch(1), leader_epoch=0)
    log.roll()
    log.append_as_leader(batch(1), leader_epoch=0)
    _crash(log)
    assert (directory / "00000000000000000004.log").stat().st_size == 10_000  # zeros after the data
    recovered = open_log(directory, cfg, recovery_point=0)
    assert recovered.log_end_offset == 5 and (directory / "00000000000000000004.log").stat().st_size == BATCH_SIZE
    assert offsets_in(read_all(recovered)) == [0, 1, 2, 3, 4]
    recovered.close()


def test_legacy_magic_entries_are_stored_recovered_and_dumped(tmp_path: Path) -> None:
    import io

    from protocol.records.builder import RecordBatchBuilder
    from storage import dump
    from storage.errors import InvalidRecordError

    def legacy(magic: int, base: int, compression: int = 0) -> bytearray:
        builder = RecordBatchBuilder(magic=magic, compression=compression, base_offset=base)
        for i in range(3):
            builder.append(1_000 + i, b"k%d" % i, b"v%d" % i)
        return builder.build()

    log = open_log(tmp_path / "t-0")
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(legacy(1, 0), leader_epoch=0)  # the broker up-converts first
    log.append_as_follower(legacy(0, 0))
    log.append_as_follower(legacy(1, 3, compression=1))
    v2 = batch(1)
    v2[0:8] = (6).to_bytes(8, "big")  # outside the CRC: a follower receives it already set
    log.append_as_follower(v2)
    assert log.log_end_offset == 7 and offsets_in(read_all(log)) == list(range(7))
    _crash(log)
    recovered = open_log(tmp_path / "t-0")
    assert recovered.log_end_offset == 7 and offsets_in(read_all(recovered, 4)) == [3, 4, 5, 6]
    recovered.close()
    out = io.StringIO()
    dump.main(["--deep-iteration", str(tmp_path / "t-0" / "00000000000000000000.log")], out, io.StringIO())
    lines = out.getvalue().splitlines()
    assert lines[2].startswith("offset: 0 position: 0 NoTimestampType: -1 ") and "magic: 0" in lines[2]
    assert any(line.startswith("offset: 5 position: ") and "compresscodec: gzip" in line for line in lines)
    assert any(line.startswith("| offset: 4 CreateTime: 1001 keySize: 2 valueSize: 2 isValid: true crc: ") for line in lines)
