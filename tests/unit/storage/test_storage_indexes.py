"""OffsetIndex, TimeIndex and TransactionIndex: layout, lookups, limits and sanity checks."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from storage.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from storage.offset_index import OffsetIndex, OffsetPosition
from storage.time_index import TimeIndex, TimestampOffset
from storage.transaction_index import AbortedTxn, TransactionIndex


def test_offset_index_is_preallocated_sparse_and_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(str(path), 100, max_index_size=1003)
    assert path.stat().st_size == 1000 and index.max_entries == 125 and index.entries == 0
    index.append(105, 0)
    index.append(110, 4200)
    index.append(130, 9000)
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(105) == OffsetPosition(105, 0)
    assert index.lookup(129) == OffsetPosition(110, 4200)
    assert index.lookup(10_000) == OffsetPosition(130, 9000)
    index.trim_to_valid_size()
    assert path.read_bytes() == struct.pack(">iiiiii", 5, 0, 10, 4200, 30, 9000)
    index.close()


def test_offset_index_rejects_non_increasing_and_overflowing_offsets(tmp_path: Path) -> None:
    index = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=80)
    index.append(10, 100)
    with pytest.raises(InvalidOffsetError):
        index.append(10, 200)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(1 << 31, 300)
    for i in range(9):
        index.append(20 + i, 200 + i)
    assert index.is_full()
    with pytest.raises(InvalidOffsetError):
        index.append(100, 999)
    index.close()


def test_offset_index_truncate_and_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "0.index")
    index = OffsetIndex(path, 0, max_index_size=800)
    for i in range(1, 11):
        index.append(i * 10, i * 1000)
    index.truncate_to(50)  # drops 50 and above
    assert index.entries == 4 and index.last_offset == 40
    index.truncate_to(45)
    assert index.entries == 4
    index.close()  # trims
    assert os.path.getsize(path) == 32
    reopened = OffsetIndex(path, 0, max_index_size=800)
    assert reopened.entries == 4 and reopened.is_full()  # an existing file keeps its length until resized
    reopened.resize(800)
    assert reopened.max_entries == 100 and reopened.entries == 4
    reopened.append(60, 6000)
    reopened.close()


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.index"
    path.write_bytes(struct.pack(">ii", -5, 0) + b"\x00" * 3)
    index = OffsetIndex(str(path), 50, max_index_size=800, writable=False)
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        index.sanity_check()
    path.write_bytes(struct.pack(">ii", -5, 0))
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        OffsetIndex(str(path), 50, max_index_size=800, writable=False).sanity_check()


def test_time_index_keeps_only_growing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(str(tmp_path / "0.timeindex"), 0, max_index_size=120)
    assert index.max_entries == 10
    index.maybe_append(1000, 5)
    index.maybe_append(1000, 9)  # same timestamp: not added
    index.maybe_append(1500, 12)
    assert index.entries == 2
    with pytest.raises(InvalidOffsetError):  # an out-of-order timestamp is refused
        index.maybe_append(1200, 20)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(2000, 3)
    assert index.lookup(999) == TimestampOffset(-1, 0)
    assert index.lookup(1000) == TimestampOffset(1000, 5)
    assert index.lookup(1499) == TimestampOffset(1000, 5)
    assert index.lookup(9999) == TimestampOffset(1500, 12)
    index.truncate_to(12)
    assert index.entries == 1 and index.last_entry == TimestampOffset(1000, 5)
    index.close()


def test_time_index_is_full_one_entry_early_but_takes_the_final_entry(tmp_path: Path) -> None:
    index = TimeIndex(str(tmp_path / "0.timeindex"), 0, max_index_size=36)
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full()
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()


def test_time_index_sanity_check_detects_backwards_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "0.timeindex"
    path.write_bytes(struct.pack(">qi", 2000, 1) + struct.pack(">qi", 1000, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(str(path), 0, writable=False).sanity_check()


def test_transaction_index_entries_collect_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(str(path), 0)
    assert not path.exists()
    index.append(AbortedTxn(7, 0, 10, 11))
    index.append(AbortedTxn(8, 5, 20, 21))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(9, 1, 20, 21))
    assert path.stat().st_size == 68
    assert path.read_bytes()[:34] == struct.pack(">hqqqq", 0, 7, 0, 10, 11)
    found, complete = index.collect_aborted_txns(12, 15)
    assert found == [AbortedTxn(8, 5, 20, 21)] and complete
    found, complete = index.collect_aborted_txns(0, 100)
    assert len(found) == 2 and not complete
    index.truncate_to(20)
    assert TransactionIndex(str(path), 0).all_aborted_txns() == [AbortedTxn(7, 0, 10, 11)]
    path.write_bytes(path.read_bytes() + b"\x01")
    with pytest.raises(CorruptIndexError):
        index.sanity_check()


def test_a_segment_indexed_as_kafka_indexes_a_multi_batch_append_passes_the_sanity_check(tmp_path: Path) -> None:
    """Kafka's LogSegment.append indexes a whole append (a follower's fetched chunk of several
    batches) under its largest offset at the position of its first batch: a log dir Kafka wrote
    that way is sound, and a broker taking it over must trust its indexes."""
    from storage_test_helpers import batch, open_log

    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), leader_epoch=0)
    log.append_as_leader(batch(2), leader_epoch=0)
    segment = log.active_segment
    segment.offset_index.reset()
    segment.offset_index.append(4, 0)  # offsets 0-4 in two batches, indexed at the first one's position
    segment.sanity_check()
    segment.offset_index.reset()
    segment.offset_index.append(3, 0)  # no batch ends at offset 3
    with pytest.raises(CorruptIndexError, match="does not match"):
        segment.sanity_check()
    log.close()
