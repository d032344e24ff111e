"""Batch-level operations on RecordBatch v2 bytes (protocol/records/batch.py)."""

import struct

import pytest
from crc32c import crc32c

from protocol.exceptions import CorruptRecordError
from protocol.records import batch as b


def _raw_batch(base_offset: int = 0, records: bytes = b"\x00" * 10, count: int = 1) -> bytearray:
    body = struct.pack(">hiqqqhii", 0, count - 1, 1000, 2000, -1, -1, -1, count) + records
    crc = crc32c(body)
    head = struct.pack(">qiibI", base_offset, len(body) + 9, -1, 2, crc)
    return bytearray(head + body)


def test_header_fields_and_crc() -> None:
    raw = _raw_batch(base_offset=5, count=3)
    h = b.validate_batch(raw)
    assert (h.base_offset, h.last_offset, h.next_offset, h.record_count) == (5, 7, 8, 3)
    assert h.size == len(raw)
    assert h.max_timestamp == 2000 and h.timestamp_type == 0


def test_rebase_keeps_crc_and_log_append_time_updates_it() -> None:
    raw = _raw_batch()
    b.set_base_offset(raw, 0, 1234)
    b.set_partition_leader_epoch(raw, 0, 7)
    h = b.validate_batch(raw)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 7)
    b.set_log_append_time(raw, 0, 99)
    h = b.validate_batch(raw)
    assert h.timestamp_type == 1 and h.max_timestamp == 99


def test_corruption_and_truncation_are_typed_errors() -> None:
    raw = _raw_batch()
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        b.validate_batch(raw)
    with pytest.raises(CorruptRecordError, match="truncated"):
        b.read_batch_header(bytes(raw[:-3]))


def test_iteration_stops_at_partial_tail() -> None:
    one = _raw_batch()
    buf = one + _raw_batch(base_offset=1) + one[:20]
    assert [p for p, _ in b.iter_batch_positions(buf)] == [0, len(one)]


def test_header_only_parse_accepts_a_batch_cut_after_its_header() -> None:
    raw = _raw_batch(base_offset=9, records=b"\x01" * 100, count=4)
    window = bytes(raw[: b.RECORD_BATCH_OVERHEAD + 5])  # header plus a little of the records
    with pytest.raises(CorruptRecordError, match="truncated"):
        b.read_batch_header(window)
    h = b.read_batch_header(window, check_size=False)
    assert (h.base_offset, h.last_offset, h.size) == (9, 12, len(raw))
    with pytest.raises(CorruptRecordError, match="truncated"):  # the header itself must be whole
        b.read_batch_header(window[: b.RECORD_BATCH_OVERHEAD - 1], check_size=False)
    bad = bytearray(window)
    struct.pack_into(">i", bad, b.BATCH_LENGTH_OFFSET, 10)  # below the minimum batchLength
    with pytest.raises(CorruptRecordError, match="batchLength"):
        b.read_batch_header(bad, check_size=False)
    bad[b.MAGIC_OFFSET] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        b.read_batch_header(bad, check_size=False)
