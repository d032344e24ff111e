"""The append hot path's shortcuts give the results of the full per-batch work."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records.batch import set_base_offset, set_partition_leader_epoch
from storage.errors import RecordBatchTooLargeError
from storage.log import Log
from storage_test_helpers import batch, config, offsets_in, open_log, read_all


def _stamped(buf: bytearray, base_offset: int, epoch: int) -> bytearray:
    """A batch as a leader wrote it: offset and epoch lie outside the CRC."""
    set_base_offset(buf, 0, base_offset)
    set_partition_leader_epoch(buf, 0, epoch)
    return buf


def test_follower_append_records_every_epoch_its_batches_start(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fetched = (
        _stamped(batch(2), 0, 1) + _stamped(batch(1), 2, 1) + _stamped(batch(3), 3, 3) + _stamped(batch(1), 6, 5)
    )
    info = log.append_as_follower(fetched)
    assert (info.first_offset, info.last_offset, info.num_batches, info.num_records) == (0, 6, 4, 7)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0), (3, 3), (5, 6)]
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.log_end_offset == 7


def test_leader_append_of_several_batches_records_its_epoch_once(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), leader_epoch=-1)  # no epoch: nothing recorded
    assert log.leader_epoch_cache.epoch_entries() == []
    info = log.append_as_leader(batch(1) + batch(2) + batch(3), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_batches) == (2, 7, 3)
    assert log.leader_epoch_cache.epoch_entries() == [(7, 2)]


def test_plain_batches_leave_producer_state_alone_next_to_idempotent_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), leader_epoch=0)
    assert log.producers.producers == {} and log.producers.map_end_offset == 2
    mixed = batch(1) + batch(2, producer_id=9, producer_epoch=0, base_sequence=0)
    log.append_as_leader(mixed, leader_epoch=0)
    entry = log.producers.last_entry(9)
    assert entry is not None and (entry.last_seq, entry.last_data_offset) == (1, 4)
    assert log.producers.map_end_offset == log.log_end_offset == 5


def test_index_entries_follow_index_interval_bytes_with_a_repeated_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(index_interval_bytes=1000))
    for _ in range(6):
        log.append_as_leader(batch(2, value_size=600, timestamp=5_000), leader_epoch=0)
    segment = log.active_segment
    # an entry for every batch after the first (each passes the interval); one time entry
    # (the timestamp never grows), and reads through the sparse index still find every batch
    assert segment.offset_index.entries == 5
    assert [segment.offset_index.entry(i).offset for i in range(5)] == [3, 5, 7, 9, 11]
    assert segment.time_index.entries == 1 and segment.time_index.last_entry == (5_001, 1)
    assert offsets_in(read_all(log)) == list(range(12))


def test_try_append_only_appends_what_cannot_block_and_changes_nothing_otherwise(tmp_path: Path) -> None:
    import threading
    import time

    now = int(time.time() * 1000)
    quick = open_log(tmp_path / "quick-0")
    quick.append_as_leader(batch(2, timestamp=now), leader_epoch=0)
    info = quick.try_append_as_leader(batch(2, timestamp=now), leader_epoch=0)
    assert info is not None and (info.first_offset, info.last_offset) == (2, 3)

    def refused(log: Log, records: bytearray) -> None:
        """Nothing written and the records untouched: the blocking append afterwards takes them as they are."""
        end, size, before = log.log_end_offset, log.size, bytes(records)
        assert log.try_append_as_leader(records, leader_epoch=0) is None
        assert (log.log_end_offset, log.size, bytes(records)) == (end, size, before)
        log.append_as_leader(records, leader_epoch=0)
        assert log.log_end_offset == end + 1

    rolling = open_log(tmp_path / "roll-0", config(segment_bytes=2_000))
    rolling.append_as_leader(batch(2, value_size=600, timestamp=now), leader_epoch=0)
    refused(rolling, batch(1, value_size=900, timestamp=now))  # would roll (and fsync the old segment)
    assert len(rolling.segments) == 2
    aged = open_log(tmp_path / "aged-0", config(segment_ms=1))
    aged.append_as_leader(batch(1, timestamp=now - 60_000), leader_epoch=0)
    refused(aged, batch(1, timestamp=now))  # segment.ms has passed since its first batch
    flushing = open_log(tmp_path / "flush-0", config(flush_messages=3))
    flushing.append_as_leader(batch(2, timestamp=now), leader_epoch=0)
    refused(flushing, batch(1, timestamp=now))  # the third message is due an fsync
    assert flushing.recovery_point == 3
    follower = open_log(tmp_path / "follower-0", config(flush_messages=3))
    assert follower.try_append_as_follower(_stamped(batch(2, timestamp=now), 0, 0)) is not None
    assert follower.try_append_as_follower(_stamped(batch(1, timestamp=now), 2, 0)) is None
    assert follower.log_end_offset == 2

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with quick._lock:
            held.set()
            release.wait(5)
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        assert quick.try_append_as_leader(batch(1, timestamp=now), leader_epoch=0) is None  # a swap or flush holds it
    finally:
        release.set()
        holder.join()
    assert quick.try_append_as_leader(batch(1, timestamp=now), leader_epoch=0) is not None


def test_append_tally_names_the_first_batch_with_the_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    three = batch(2, timestamps=[10, 30]) + batch(1, timestamp=50) + batch(3, timestamps=[50, 20, 40])
    info = log.append_as_leader(three, leader_epoch=0)
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.num_records) == (50, 2, 6)
    assert (info.log_append_time, info.first_offset, info.last_offset) == (-1, 0, 5)


def test_log_append_time_gives_every_batch_the_time_and_the_first_carries_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"))
    log.append_as_leader(batch(1), leader_epoch=0, now=7_000)
    info = log.append_as_leader(batch(2) + batch(3), leader_epoch=0, now=9_000)
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (9_000, 2, 9_000)
    assert (info.first_offset, info.last_offset, info.num_records) == (1, 5, 5)


def test_a_batch_larger_than_the_segment_is_refused_before_offsets_are_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_bytes=200))
    big = batch(3, value_size=100)
    as_sent = bytes(big)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(big, leader_epoch=4)
    assert big == as_sent and log.log_end_offset == 0 and log.size == 0
