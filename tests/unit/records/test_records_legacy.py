"""Legacy message sets, magic 0 and 1 (protocol/records/legacy.py) through the log_entry view."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.exceptions import CorruptRecordError
from protocol.records.builder import LOG_APPEND_TIME, RecordBatchBuilder
from protocol.records.compression import CompressionType, compress
from protocol.records.legacy import build_message_set, encode_legacy_entry
from protocol.records.log_entry import (
    decode_entry_records,
    iter_log_entries,
    read_log_entry,
    validate_log_entry,
)
from protocol.records.record import Record

LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]
OPT_BYTES = st.none() | st.binary(max_size=64)
MESSAGES = st.lists(st.tuples(st.integers(0, 2**41), OPT_BYTES, OPT_BYTES), min_size=1, max_size=15)


def _build(magic: int, codec: int, base_offset: int, messages, **kwargs) -> bytearray:
    builder = RecordBatchBuilder(magic=magic, compression=codec, base_offset=base_offset, **kwargs)
    for timestamp, key, value in messages:
        builder.append(timestamp, key, value)
    return builder.build()


def _all_records(buf) -> list[Record]:
    out: list[Record] = []
    for pos, _ in iter_log_entries(buf):
        validate_log_entry(buf, pos)
        out.extend(decode_entry_records(buf, pos))
    return out


@settings(max_examples=60, deadline=None)
@given(messages=MESSAGES, base_offset=st.integers(0, 2**40))
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_round_trip(magic: int, codec: int, messages, base_offset: int) -> None:
    buf = _build(magic, codec, base_offset, messages)
    expected = [
        Record(base_offset + i, ts if magic == 1 else -1, key, value) for i, (ts, key, value) in enumerate(messages)
    ]
    assert _all_records(buf) == expected
    entries = list(iter_log_entries(buf))
    assert len(entries) == (len(messages) if codec == CompressionType.NONE else 1)
    last = entries[-1][1]
    assert last.magic == magic and last.compression == codec
    assert last.last_offset == base_offset + len(messages) - 1
    assert entries[0][1].base_offset == base_offset
    assert sum(h.record_count for _, h in entries) == len(messages)
    assert not last.is_control and last.producer_id == -1 and last.partition_leader_epoch == -1
    if magic == 0:
        assert last.timestamp_type == -1 and last.max_timestamp == -1
    elif codec != CompressionType.NONE:
        assert last.max_timestamp == max(ts for ts, _, _ in messages)


def test_magic1_compressed_wrapper_uses_relative_inner_offsets() -> None:
    buf = _build(1, CompressionType.GZIP, 1000, [(5, b"a", b"1"), (7, b"b", b"2"), (6, None, b"3")])
    header = validate_log_entry(buf)
    assert header.last_offset == 1002 and header.base_offset == 1000 and header.record_count == 3
    inner = zlib.decompress(buf[12 + 4 + 1 + 1 + 8 + 4 + 4 :], 47)
    offsets = [struct.unpack_from(">q", inner, pos)[0] for pos in _positions(inner)]
    assert offsets == [0, 1, 2]
    assert header.max_timestamp == 7


def test_magic0_compressed_wrapper_uses_absolute_inner_offsets() -> None:
    buf = _build(0, CompressionType.GZIP, 1000, [(0, b"a", b"1"), (0, b"b", b"2")])
    inner = zlib.decompress(buf[12 + 4 + 1 + 1 + 4 + 4 :], 47)
    assert [struct.unpack_from(">q", inner, p)[0] for p in _positions(inner)] == [1000, 1001]
    assert [r.offset for r in decode_entry_records(buf)] == [1000, 1001]


def test_wrapper_offset_rebased_by_broker_shifts_all_inner_offsets() -> None:
    buf = _build(1, CompressionType.SNAPPY, 0, [(1, None, b"x")] * 3)
    struct.pack_into(">q", buf, 0, 52)  # the broker assigns the last offset to the wrapper
    assert [r.offset for r in decode_entry_records(buf)] == [50, 51, 52]


def test_magic1_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    inner = b"".join(encode_legacy_entry(i, 1, 0, 10 + i, None, b"v") for i in range(2))
    wrapper = encode_legacy_entry(1, 1, CompressionType.GZIP | 0x08, 9999, None, compress(1, inner, magic=1))
    header = validate_log_entry(wrapper)
    assert header.timestamp_type == 1 and header.max_timestamp == 9999
    assert [r.timestamp for r in decode_entry_records(wrapper)] == [9999, 9999]
    built = _build(1, CompressionType.LZ4, 0, [(1, None, b"a"), (2, None, b"b")],
                   timestamp_type=LOG_APPEND_TIME, log_append_time=4242)
    assert [r.timestamp for r in decode_entry_records(built)] == [4242, 4242]
    assert read_log_entry(built).timestamp_type == 1


def test_crc32_is_checked() -> None:
    buf = bytearray(encode_legacy_entry(0, 1, 0, 1, b"k", b"v"))
    assert validate_log_entry(buf).crc == zlib.crc32(buf[16:])
    buf[-1] ^= 1
    read_log_entry(buf)  # framing alone is fine
    with pytest.raises(CorruptRecordError, match="position 0 failed its CRC"):
        validate_log_entry(buf)


def test_inner_crc_and_inner_rules_are_checked() -> None:
    inner = bytearray(encode_legacy_entry(0, 1, 0, 1, None, b"v"))
    inner[-1] ^= 1
    wrapper = encode_legacy_entry(0, 1, CompressionType.GZIP, 1, None, compress(1, inner))
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_entry_records(wrapper)
    mixed = encode_legacy_entry(0, 0, 0, -1, None, b"v")
    wrapper = encode_legacy_entry(0, 1, CompressionType.GZIP, 1, None, compress(1, mixed))
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_entry_records(wrapper)
    nested = encode_legacy_entry(0, 1, CompressionType.GZIP, 1, None, compress(1, b""))
    wrapper = encode_legacy_entry(0, 1, CompressionType.GZIP, 1, None, compress(1, nested))
    with pytest.raises(CorruptRecordError, match="nests"):
        decode_entry_records(wrapper)
    with pytest.raises(CorruptRecordError, match="null value"):
        decode_entry_records(encode_legacy_entry(0, 1, CompressionType.GZIP, 1, None, None))
    with pytest.raises(CorruptRecordError, match="no messages"):
        decode_entry_records(encode_legacy_entry(0, 1, CompressionType.GZIP, 1, None, compress(1, b"")))


def test_framing_errors() -> None:
    good = encode_legacy_entry(0, 0, 0, -1, b"key", b"value")
    with pytest.raises(CorruptRecordError, match="truncated"):
        read_log_entry(good[:-1] + b"")
    too_small = struct.pack(">qi", 0, 10) + good[12:22]
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        read_log_entry(too_small)
    bad_key = bytearray(good)
    struct.pack_into(">i", bad_key, 18, 1000)
    with pytest.raises(CorruptRecordError, match="length"):
        read_log_entry(bad_key)
    with pytest.raises(CorruptRecordError, match="unknown magic"):
        read_log_entry(good[:16] + b"\x05" + good[17:])


def test_magic0_lz4_reads_both_header_checksums() -> None:
    inner = encode_legacy_entry(7, 0, 0, -1, None, b"v" * 100)
    for frame in (compress(3, inner, magic=0), compress(3, inner, magic=1)):
        wrapper = encode_legacy_entry(7, 0, CompressionType.LZ4, -1, None, frame)
        assert [r.offset for r in decode_entry_records(wrapper)] == [7]


def test_build_message_set_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        build_message_set(2, 0, 0, [(0, 0, None, b"")])
    with pytest.raises(ValueError):
        build_message_set(0, 0, 0, [(0, 0, None, b"")], log_append_time=5)
    with pytest.raises(ValueError):
        RecordBatchBuilder(magic=1, compression=CompressionType.ZSTD)
    with pytest.raises(ValueError):
        RecordBatchBuilder(magic=1).append(0, None, b"", [("h", b"")])
    assert build_message_set(1, 1, 0, []) == bytearray()


def test_legacy_wrapper_offset_zero_keeps_relative_offsets() -> None:
    """A producer-side magic 1 set (wrapper offset 0) reads as offsets 0..n-1, as in Kafka."""
    inner = b"".join(encode_legacy_entry(i, 1, 0, 5, None, b"v") for i in range(3))
    wrapper = encode_legacy_entry(0, 1, CompressionType.GZIP, 5, None, compress(1, inner))
    assert [r.offset for r in decode_entry_records(wrapper)] == [0, 1, 2]
    below_last = encode_legacy_entry(1, 1, CompressionType.GZIP, 5, None, compress(1, inner))
    with pytest.raises(CorruptRecordError, match="below its last inner offset"):
        decode_entry_records(below_last)


def _positions(message_set: bytes) -> list[int]:
    positions, pos = [], 0
    while pos < len(message_set):
        positions.append(pos)
        pos += 12 + struct.unpack_from(">i", message_set, pos + 8)[0]
    return positions
