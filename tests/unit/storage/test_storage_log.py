"""Log appends, reads, rolling and retention at their boundaries."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from protocol.records.batch import read_batch_header
from protocol.records.log_entry import iter_log_entries
from storage.errors import (
    CorruptRecordStorageError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StaleLeaderEpochError,
)
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation, Log
from storage.log_config import LogConfig
from storage_test_helpers import batch, config, offsets_in, open_log, read_all

BATCH_SIZE = len(batch(1))


def test_append_assigns_offsets_epoch_and_returns_append_info(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    info = log.append_as_leader(batch(3), leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.log_start_offset, info.log_append_time) == (0, 2, 0, -1)
    buf = batch(2)
    info = log.append_as_leader(buf, leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.num_records) == (3, 4, 2)
    header = read_batch_header(buf)
    assert header.base_offset == 3 and header.partition_leader_epoch == 4  # rewritten in place
    assert log.log_end_offset == 5 and offsets_in(read_all(log)) == [0, 1, 2, 3, 4]
    assert log.leader_epoch_cache.epoch_entries() == [(4, 0)]
    log.close()


def test_log_append_time_rewrites_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(2), leader_epoch=0, now=123_456)
    assert info.log_append_time == 123_456
    data = read_all(log)
    assert read_batch_header(data).max_timestamp == 123_456 and read_batch_header(data).timestamp_type == 1
    log.close()


def test_bad_appends_raise_typed_errors_and_write_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(max_message_bytes=200, segment_bytes=300))
    corrupt = batch(1)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordStorageError):
        log.append_as_leader(corrupt, leader_epoch=0)
    with pytest.raises(CorruptRecordStorageError):
        log.append_as_leader(batch(1)[:-3], leader_epoch=0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch(1, value_size=300), leader_epoch=0)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(batch(1, value_size=100) + batch(1, value_size=100) + batch(1, value_size=100), leader_epoch=0)
    nonzero = batch(1)
    nonzero[0:8] = (5).to_bytes(8, "big")
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(nonzero, leader_epoch=0)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_validated_appends_skip_only_the_crc_check(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(max_message_bytes=200))
    checked = batch(2)
    checked[-1] ^= 0xFF  # a CRC mismatch the default path must catch
    with pytest.raises(CorruptRecordStorageError, match="CRC"):
        log.append_as_leader(bytearray(checked), leader_epoch=0)
    trusted = batch(2)
    info = log.append_as_leader(trusted, leader_epoch=0, validated=True)  # the caller checked the CRC
    assert (info.first_offset, info.last_offset) == (0, 1)
    with pytest.raises(CorruptRecordStorageError, match="partial batch"):  # framing is still checked
        log.append_as_leader(batch(1) + batch(1)[:20], leader_epoch=0, validated=True)
    with pytest.raises(RecordTooLargeError):  # and so are the size and origin rules
        log.append_as_leader(batch(1, value_size=300), leader_epoch=0, validated=True)
    with pytest.raises(CorruptRecordStorageError, match="magic"):
        bad_magic = batch(1)
        bad_magic[16] = 7
        log.append_as_leader(bad_magic, leader_epoch=0, validated=True)
    assert log.log_end_offset == 2 and offsets_in(read_all(log)) == [0, 1]
    log.close()


def test_mixed_batches_fail_at_the_first_bad_one_and_write_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(max_message_bytes=200))
    corrupt = batch(1)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordStorageError, match=f"position {BATCH_SIZE}"):
        log.append_as_leader(batch(1) + corrupt + batch(1), leader_epoch=0)
    negative = batch(1)
    negative[8:12] = (-5).to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordStorageError, match="negative size"):
        log.append_as_leader(batch(1) + negative, leader_epoch=0)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_appends_extend_one_verified_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(50):
        log.append_as_leader(batch(1), leader_epoch=0)
    segment = log.active_segment
    assert segment._verified == [(0, 50 * BATCH_SIZE)]  # constant size however many appends
    segment._verified = [(0, BATCH_SIZE), (3 * BATCH_SIZE, 4 * BATCH_SIZE)]  # as after reads of a reopened log
    segment._mark_verified(BATCH_SIZE, 3 * BATCH_SIZE)  # fills the gap: everything merges
    assert segment._verified == [(0, 4 * BATCH_SIZE)]
    log.close()


def test_read_returns_whole_batches_within_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(10):
        log.append_as_leader(batch(2), leader_epoch=0)
    size = len(batch(2))
    info = log.read(3, 2 * size + 5)
    data = info.records.read_bytes()
    assert [h.base_offset for _, h in iter_log_entries(data)] == [2, 4]
    assert info.fetch_offset_metadata.relative_position_in_segment == size
    assert info.records.position == size and len(info.records) == 2 * size
    # max_bytes below one batch still returns the first batch (min one message)
    assert len(log.read(0, 1).records) == size
    assert len(log.read(0, 1, min_one_message=False).records) == 0
    # the high watermark bounds read_uncommitted fetches
    log.update_high_watermark(6)
    assert offsets_in(log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).records.read_bytes()) == list(range(6))
    assert len(log.read(6, 1 << 20, FetchIsolation.HIGH_WATERMARK).records) == 0
    assert len(log.read(20, 1 << 20).records) == 0  # at the log end: empty
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    log.close()


def test_indexed_reads_match_a_full_scan(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(index_interval_bytes=150))
    sizes = []
    for i in range(30):
        buf = batch(1 + i % 3, value_size=20 + 13 * i)
        sizes.append((log.log_end_offset, len(buf), 1 + i % 3))
        log.append_as_leader(buf, leader_epoch=0)
    assert log.active_segment.offset_index.entries > 5
    for fetch in (0, 1, 7, 20, 33, 50):
        for max_bytes in (1, 200, 700, 1500, 5000):
            for bound in (fetch + 1, fetch + 9, 40, log.log_end_offset):
                # brute force: whole batches from the one holding `fetch`, below `bound`, within max_bytes
                chosen, total = [], 0
                for base, size, count in sizes:
                    if base + count - 1 < fetch:
                        continue
                    if base + count - 1 >= bound or (total + size > max_bytes and chosen):
                        break
                    chosen.append(base)
                    total += size
                if fetch >= bound:
                    chosen = []
                data = log.read(fetch, max_bytes, max_offset=bound).records.read_bytes()
                assert [h.base_offset for _, h in iter_log_entries(data)] == chosen, (fetch, max_bytes, bound)
    log.close()


def test_read_spans_segments_and_never_serves_corrupt_bytes(tmp_path: Path) -> None:
    cfg = config(segment_bytes=3 * BATCH_SIZE)
    log = open_log(tmp_path / "t-0", cfg)
    for _ in range(7):
        log.append_as_leader(batch(1), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert offsets_in(log.read(3, 1 << 20).records.read_bytes()) == [3, 4, 5]
    log.close()
    # flip a byte in the middle segment after a clean shutdown: reads stop before it
    path = tmp_path / "t-0" / "00000000000000000003.log"
    data = bytearray(path.read_bytes())
    data[BATCH_SIZE + 70] ^= 0x55
    path.write_bytes(bytes(data))
    log = open_log(tmp_path / "t-0", cfg, had_clean_shutdown=True, recovery_point=7)
    assert offsets_in(log.read(3, 1 << 20).records.read_bytes()) == [3]
    with pytest.raises(CorruptRecordStorageError):
        log.read(4, 1 << 20)
    assert log.recovery_point == 3  # the next start recovers this segment
    log.close()


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_bytes=2 * len(batch(3))))
    log.append_as_leader(batch(3, timestamps=[100, 300, 200]), leader_epoch=1)
    log.append_as_leader(batch(3, timestamps=[250, 400, 500]), leader_epoch=2)
    log.append_as_leader(batch(3, timestamps=[600, 601, 602]), leader_epoch=2)
    assert log.fetch_offset_by_timestamp(150)[:2] == (300, 1)
    assert log.fetch_offset_by_timestamp(201)[:2] == (300, 1)
    assert log.fetch_offset_by_timestamp(350) == (400, 4, 2)
    assert log.fetch_offset_by_timestamp(601)[:2] == (601, 7)
    assert log.fetch_offset_by_timestamp(700) is None
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, 1)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (-1, 9, 2)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (602, 8, 2)
    log.close()


# --- rolling ------------------------------------------------------------------------------


def test_exactly_full_segment_does_not_roll_until_the_next_byte(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_bytes=3 * BATCH_SIZE))
    for _ in range(3):
        log.append_as_leader(batch(1), leader_epoch=0)
    assert len(log.segments) == 1 and log.active_segment.size == 3 * BATCH_SIZE
    log.append_as_leader(batch(1), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    rolled = tmp_path / "t-0"
    assert (rolled / "00000000000000000003.snapshot").read_bytes() == bytes.fromhex("0001") + bytes.fromhex("48674BC7") + b"\0" * 4
    assert (rolled / "00000000000000000000.index").stat().st_size == 0  # trimmed at roll
    assert (rolled / "00000000000000000003.index").stat().st_size == LogConfig().segment_index_bytes
    log.close()


def test_empty_active_segment_never_rolls_on_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_ms=10))
    log.append_as_leader(batch(1, timestamp=1_000), leader_epoch=0)
    log.append_as_leader(batch(1, timestamp=1_005), leader_epoch=0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, timestamp=1_011), leader_epoch=0)  # waited 11 > 10 ms since first batch
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.roll()  # rolling an empty active segment is a no-op
    assert len(log.segments) == 3
    log.close()


def test_roll_when_offset_index_is_full(tmp_path: Path) -> None:
    # 48-byte indexes: 6 offset entries; equal timestamps keep the time index at one entry
    log = open_log(tmp_path / "t-0", config(segment_index_bytes=48, index_interval_bytes=1))
    for _ in range(8):
        log.append_as_leader(batch(1, timestamp=10), leader_epoch=0)
    first = log.segments.first
    assert [s.base_offset for s in log.segments] == [0, 7]
    assert first is not None and first.offset_index.entries == 6 and first.time_index.entries == 1
    assert offsets_in(read_all(log)) == list(range(8))
    log.close()


def test_roll_when_time_index_is_full(tmp_path: Path) -> None:
    # 48 bytes hold 4 time-index slots, "full" at 3 so the final entry still fits
    log = open_log(tmp_path / "t-0", config(segment_index_bytes=48, index_interval_bytes=1))
    for i in range(5):
        log.append_as_leader(batch(1, timestamp=10 + i), leader_epoch=0)
    first = log.segments.first
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert first is not None and [first.time_index.entry(i) for i in range(first.time_index.entries)] == [(11, 1), (12, 2), (13, 3)]
    log.close()


def test_roll_when_relative_offset_would_overflow(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(1), leader_epoch=0)
    big = batch(1)
    big[0:8] = (0x7FFFFFFF + 5).to_bytes(8, "big")
    from protocol.records.batch import update_crc  # header rewrite for a follower append far ahead
    update_crc(big, 0)
    log.append_as_follower(big)
    assert [s.base_offset for s in log.segments] == [0, 0x7FFFFFFF + 5]
    assert log.log_end_offset == 0x7FFFFFFF + 6
    log.close()


# --- retention ----------------------------------------------------------------------------


def _filled(tmp_path: Path, **cfg: object) -> Log:
    log = open_log(tmp_path / "t-0", config(segment_bytes=2 * BATCH_SIZE, **cfg))
    for i in range(6):
        log.append_as_leader(batch(1, timestamp=1_000 + i * 100), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    return log


def test_retention_ms_deletes_whole_old_segments_asynchronously(tmp_path: Path) -> None:
    log = _filled(tmp_path, retention_ms=250, file_delete_delay_ms=1000)
    assert log.delete_old_segments(now=1_400) == 1  # segment 0 max ts 1100: 300 > 250
    assert log.log_start_offset == 2 and [s.base_offset for s in log.segments] == [2, 4]
    directory = tmp_path / "t-0"
    assert (directory / "00000000000000000000.log.deleted").exists()
    assert log.delete_pending_segments(now=10**15) == 1
    assert not (directory / "00000000000000000000.log.deleted").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    log.close()


def test_retention_breach_on_the_active_segment_rolls_first(tmp_path: Path) -> None:
    log = _filled(tmp_path, retention_ms=10, file_delete_delay_ms=0)
    assert log.delete_old_segments(now=10_000) == 3
    assert [s.base_offset for s in log.segments] == [6] and log.active_segment.size == 0
    assert log.log_start_offset == 6 and log.log_end_offset == 6
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.log_end_offset == 7
    log.close()


def test_retention_waits_for_the_high_watermark(tmp_path: Path) -> None:
    log = _filled(tmp_path, retention_ms=10, file_delete_delay_ms=0)
    log.update_high_watermark(3)
    assert log.delete_old_segments(now=10_000) == 1  # segment 2 ends at 4 > high watermark 3
    assert log.log_start_offset == 2
    log.close()


def test_retention_bytes_keeps_the_newest_bytes(tmp_path: Path) -> None:
    log = _filled(tmp_path, retention_bytes=3 * BATCH_SIZE, file_delete_delay_ms=0)
    assert log.delete_old_segments(now=1_000) == 1  # 6 batches - 3 allowed: only one whole segment fits
    assert [s.base_offset for s in log.segments] == [2, 4]
    log.close()


def test_delete_records_moves_log_start_and_deletes_segments(tmp_path: Path) -> None:
    log = _filled(tmp_path, file_delete_delay_ms=0)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(7, from_delete_records=True)
    assert log.maybe_increment_log_start_offset(3, from_delete_records=True)
    assert offsets_in(read_all(log)) == [3, 4, 5]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert log.delete_old_segments(now=0) == 1
    assert [s.base_offset for s in log.segments] == [2, 4]
    log.close()


def test_flush_messages_advances_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(flush_messages=3))
    log.append_as_leader(batch(2), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 3
    log.close()


def test_a_flush_covering_a_new_segment_syncs_the_partition_directory(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """As Kafka's LocalLog.flush: the directory entries of segments created since the last flush
    are made durable with them; a flush within an already flushed segment leaves the directory."""
    synced: list[str] = []
    monkeypatch.setattr("storage.log.fsync_dir", synced.append)
    log = open_log(tmp_path / "t-0", config(segment_bytes=2 * BATCH_SIZE))
    log.append_as_leader(batch(1), leader_epoch=0)
    log.flush()
    assert synced == [log.dir]
    log.append_as_leader(batch(1), leader_epoch=0)
    log.flush()
    assert synced == [log.dir]  # the same segment: nothing new in the directory
    log.append_as_leader(batch(1), leader_epoch=0)  # rolls: the old segment is flushed, the new one is new
    log.flush()
    assert [s.base_offset for s in log.segments] == [0, 2] and synced == [log.dir, log.dir]
    log.close()


def test_close_writes_snapshot_and_trims_indexes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(index_interval_bytes=10))
    for _ in range(5):
        log.append_as_leader(batch(1), leader_epoch=0)
    log.close()
    directory = tmp_path / "t-0"
    assert (directory / "00000000000000000005.snapshot").exists()
    assert (directory / "00000000000000000000.index").stat().st_size == 4 * 8
    assert os.path.getsize(directory / "00000000000000000000.timeindex") % 12 == 0
    reopened = open_log(directory, had_clean_shutdown=True, recovery_point=5)
    assert reopened.log_end_offset == 5 and offsets_in(read_all(reopened)) == [0, 1, 2, 3, 4]
    reopened.close()


def test_old_producer_snapshots_are_dropped_after_the_recovery_point_checkpoint(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_bytes=BATCH_SIZE))
    for _ in range(5):
        log.append_as_leader(batch(1), leader_epoch=0)
    directory = tmp_path / "t-0"
    snapshots = lambda: sorted(n for n in os.listdir(directory) if n.endswith(".snapshot"))  # noqa: E731
    assert snapshots() == [f"{o:020d}.snapshot" for o in (1, 2, 3, 4)]
    assert log.delete_snapshots_after_recovery_point_checkpoint() == 3  # the segment before the active one
    assert snapshots() == [f"{o:020d}.snapshot" for o in (3, 4)]
    log.close()


def test_leader_bookkeeping_entry_points(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), leader_epoch=2)
    assert log.assign_epoch_at_log_end(5) == 3  # becoming leader at epoch 5
    assert log.end_offset_for_epoch(2) == (2, 3) and log.end_offset_for_epoch(5) == (5, 3)
    assert log.maybe_increment_high_watermark(2) and not log.maybe_increment_high_watermark(1)
    assert log.maybe_increment_high_watermark(99) and log.high_watermark == 3  # clamped to the log end
    log.close()


def test_a_new_leader_epoch_starts_after_an_append_in_flight(tmp_path: Path) -> None:
    """Becoming leader at a new epoch while an append of the old one holds the log on an I/O thread
    (a roll, say): the epoch starts after that append's batch, not at the offset it took. Read
    outside the lock, the log end gave the epoch a start its batch then took with the old epoch, and
    the followers, which learn epochs from the batches, disagreed by one (a mixed-cluster run)."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), leader_epoch=2)  # offsets 0..2
    holding = threading.Event()

    def slow_append() -> None:
        with log._lock:  # what an append on an I/O thread holds while it rolls and fsyncs
            holding.set()
            time.sleep(0.2)
            log.append_as_leader(batch(2), leader_epoch=2)  # offsets 3..4, epoch 2
    appender = threading.Thread(target=slow_append)
    appender.start()
    holding.wait()
    assert log.assign_epoch_at_log_end(3) == 5  # the broker becoming leader at epoch 3 meanwhile
    appender.join()
    assert (log.end_offset_for_epoch(2), log.end_offset_for_epoch(3)) == ((2, 5), (3, 5))
    log.close()


def test_an_append_decided_under_an_older_leader_epoch_is_refused(tmp_path: Path) -> None:
    """Its batch would carry the old epoch after the new one started (and the epoch cache would
    drop the new one): NOT_LEADER_OR_FOLLOWER, nothing written, so the producer retries."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), leader_epoch=2)
    log.assign_epoch_at_log_end(3)
    with pytest.raises(StaleLeaderEpochError):
        log.append_as_leader(batch(2), leader_epoch=2)
    assert log.log_end_offset == 3 and log.leader_epoch_cache.latest_epoch() == 3
    assert log.append_as_leader(batch(2), leader_epoch=3).first_offset == 3
    log.close()


def test_reads_after_a_clean_restart_check_each_region_once(tmp_path: Path) -> None:
    cfg = config(segment_bytes=1 << 20)
    log = open_log(tmp_path / "t-0", cfg)
    for _ in range(6):
        log.append_as_leader(batch(1), leader_epoch=0)
    log.close()
    log = open_log(tmp_path / "t-0", cfg, had_clean_shutdown=True, recovery_point=6)
    segment = log.active_segment
    assert segment._first_unverified(0, segment.size) == 0  # nothing known yet
    log.append_as_leader(batch(1), leader_epoch=0)  # appended bytes are validated on the way in
    assert offsets_in(log.read(6, 1 << 20).records.read_bytes()) == [6]
    assert segment._first_unverified(6 * BATCH_SIZE, 7 * BATCH_SIZE) == 7 * BATCH_SIZE
    assert offsets_in(log.read(2, 2 * BATCH_SIZE).records.read_bytes()) == [2, 3]
    assert segment._first_unverified(0, 7 * BATCH_SIZE) == 0
    assert segment._first_unverified(2 * BATCH_SIZE, 4 * BATCH_SIZE) == 4 * BATCH_SIZE
    assert offsets_in(read_all(log)) == list(range(7))
    assert segment._first_unverified(0, 7 * BATCH_SIZE) == 7 * BATCH_SIZE
    log.close()
