"""RecordBatch v2: records, builder, control batches (protocol/records/{record,builder,control}.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.exceptions import CorruptRecordError
from protocol.records import batch
from protocol.records.builder import LOG_APPEND_TIME, RecordBatchBuilder, build_control_batch
from protocol.records.compression import CompressionType
from protocol.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    encode_control_key,
    parse_control_type,
)
from protocol.records.log_entry import decode_entry_records, validate_log_entry
from protocol.records.record import Record, decode_records, encode_record, encode_varint, read_varint

INT64 = st.integers(-(2**63), 2**63 - 1)
TIMESTAMPS = st.integers(0, 2**41)
OPT_BYTES = st.none() | st.binary(max_size=64)
HEADERS = st.lists(st.tuples(st.text(max_size=8), OPT_BYTES), max_size=3)
RECORDS = st.lists(st.tuples(TIMESTAMPS, OPT_BYTES, OPT_BYTES, HEADERS), min_size=1, max_size=20)


@given(INT64)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 10
    assert read_varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    "value, encoded",
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"), (300, b"\xd8\x04")],
)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded


def test_varint_longer_than_ten_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff" * 11, 0)


@settings(max_examples=150, deadline=None)
@given(
    records=RECORDS,
    codec=st.sampled_from(list(CompressionType)),
    base_offset=st.integers(0, 2**40),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 32767), st.integers(-1, 2**31 - 1)),
    transactional=st.booleans(),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
def test_batch_round_trip(records, codec, base_offset, producer, transactional, leader_epoch) -> None:
    producer_id, producer_epoch, base_sequence = producer
    builder = RecordBatchBuilder(
        compression=codec,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        partition_leader_epoch=leader_epoch,
    )
    for timestamp, key, value, headers in records:
        builder.append(timestamp, key, value, headers)
    buf = builder.build()

    header = validate_log_entry(buf)
    assert header.size == len(buf)
    assert header.compression == codec
    assert header.record_count == len(records)
    assert header.base_offset == base_offset
    assert header.last_offset == base_offset + len(records) - 1
    assert header.base_timestamp == records[0][0]
    assert header.max_timestamp == max(r[0] for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.is_transactional == transactional and not header.is_control
    assert header.partition_leader_epoch == leader_epoch
    assert header.timestamp_type == 0
    expected = [Record(base_offset + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(records)]
    assert decode_entry_records(buf) == expected


def test_log_append_time_replaces_every_record_timestamp() -> None:
    builder = RecordBatchBuilder(timestamp_type=LOG_APPEND_TIME, log_append_time=5000)
    builder.append(10, b"a", b"1")
    builder.append(20, b"b", b"2")
    buf = builder.build()
    header = validate_log_entry(buf)
    assert header.timestamp_type == 1 and header.max_timestamp == 5000 and header.base_timestamp == 10
    assert [r.timestamp for r in decode_entry_records(buf)] == [5000, 5000]


def test_set_log_append_time_on_built_batch_is_seen_by_decoder() -> None:
    builder = RecordBatchBuilder(compression=CompressionType.LZ4)
    builder.append(10, None, b"x" * 100)
    buf = builder.build()
    batch.set_log_append_time(buf, 0, 777)
    validate_log_entry(buf)
    assert [r.timestamp for r in decode_entry_records(buf)] == [777]


def test_explicit_offsets_with_gaps_like_a_compacted_batch() -> None:
    builder = RecordBatchBuilder(base_offset=100)
    builder.append(1, b"k", b"v", offset=100)
    builder.append(2, b"k", None, offset=105)
    buf = builder.build()
    header = validate_log_entry(buf)
    assert (header.last_offset_delta, header.record_count) == (5, 2)
    assert [r.offset for r in decode_entry_records(buf)] == [100, 105]
    with pytest.raises(ValueError):
        builder.append(3, None, None, offset=105)


def test_empty_builder_builds_nothing() -> None:
    assert RecordBatchBuilder().build() == bytearray()


def test_header_key_must_not_be_null() -> None:
    with pytest.raises(ValueError):
        encode_record(0, 0, None, None, [(None, b"x")])  # type: ignore[list-item]
    # A hand-made record whose header key length is -1.
    body = b"\x00" + encode_varint(0) + encode_varint(0) + b"\x01\x01" + encode_varint(1) + b"\x01\x01"
    with pytest.raises(CorruptRecordError, match="null key"):
        decode_records(encode_varint(len(body)) + body, 1, 0, 0)


def test_record_length_must_match_its_fields() -> None:
    good = encode_record(0, 0, b"k", b"v")
    longer = encode_varint(len(good)) + good[1:] + b"\x00"
    with pytest.raises(CorruptRecordError):
        decode_records(longer, 1, 0, 0)
    with pytest.raises(CorruptRecordError, match="remain"):
        decode_records(good + b"\x00", 1, 0, 0)
    with pytest.raises(CorruptRecordError, match="declares 2 records"):
        decode_records(good, 2, 0, 0)


def test_invalid_utf8_header_key_survives_a_round_trip() -> None:
    raw_key = b"\xff\xfe"
    body = (
        b"\x00" + encode_varint(0) + encode_varint(0) + b"\x01\x01" + encode_varint(1)
        + encode_varint(2) + raw_key + b"\x01"
    )
    (record,) = decode_records(encode_varint(len(body)) + body, 1, 0, 0)
    assert encode_record(0, 0, None, None, record.headers) == encode_varint(len(body)) + body


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batch_layout(control_type: ControlRecordType) -> None:
    marker = EndTransactionMarker(control_type, coordinator_epoch=17)
    buf = build_control_batch(marker, producer_id=42, producer_epoch=3, timestamp=999, base_offset=50)
    header = validate_log_entry(buf)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    assert (header.base_offset, header.record_count, header.last_offset_delta) == (50, 1, 0)
    (record,) = decode_entry_records(buf)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 17)
    assert record.headers == [] and record.offset == 50 and record.timestamp == 999
    assert EndTransactionMarker.decode(record.key, record.value) == marker


def test_control_types_and_unknown_types_are_skippable() -> None:
    assert parse_control_type(encode_control_key(ControlRecordType.KRAFT_VOTERS)) is ControlRecordType.KRAFT_VOTERS
    assert parse_control_type(struct.pack(">hh", 0, 99)) is None
    with pytest.raises(CorruptRecordError):
        parse_control_type(b"\x00")
    with pytest.raises(CorruptRecordError, match="version"):
        parse_control_type(struct.pack(">hh", -1, 0))
    with pytest.raises(CorruptRecordError):
        EndTransactionMarker.decode(encode_control_key(ControlRecordType.LEADER_CHANGE), b"\x00" * 6)
    with pytest.raises(CorruptRecordError):
        EndTransactionMarker.decode(encode_control_key(ControlRecordType.COMMIT), b"\x00\x00")
    # A newer value version with extra trailing fields is still read by its v0 prefix.
    newer = struct.pack(">hiq", 1, 8, 0)
    assert EndTransactionMarker.decode(encode_control_key(ControlRecordType.ABORT), newer).coordinator_epoch == 8
    with pytest.raises(ValueError):
        EndTransactionMarker(ControlRecordType.SNAPSHOT_HEADER, 0)


def test_corrupted_crc_is_reported_with_position() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    buf = bytearray(b"\x00" * 7) + builder.build()
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="position 7 failed its CRC"):
        validate_log_entry(buf, 7)


@settings(max_examples=100, deadline=None)
@given(
    control_type=st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT]),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 32767),
    timestamp=TIMESTAMPS,
    base_offset=st.integers(0, 2**62),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
def test_control_batch_round_trip(
    control_type, coordinator_epoch, producer_id, producer_epoch, timestamp, base_offset, leader_epoch
) -> None:
    marker = EndTransactionMarker(control_type, coordinator_epoch)
    buf = build_control_batch(
        marker, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=timestamp,
        base_offset=base_offset, partition_leader_epoch=leader_epoch,
    )
    header = validate_log_entry(buf)
    assert (header.producer_id, header.producer_epoch, header.partition_leader_epoch) == (
        producer_id, producer_epoch, leader_epoch,
    )
    assert header.max_timestamp == header.base_timestamp == timestamp
    (record,) = decode_entry_records(buf)
    assert parse_control_type(record.key) is control_type
    assert EndTransactionMarker.decode(record.key, record.value) == marker
    assert record.offset == base_offset
