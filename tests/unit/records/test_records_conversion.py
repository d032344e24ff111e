"""Up/down-conversion, recompression and per-batch helpers (conversion.py, batch.count_records)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.exceptions import CorruptRecordError, MalformedRecordError, UnsupportedCompressionError
from protocol.records import batch
from protocol.records.builder import LOG_APPEND_TIME, RecordBatchBuilder, build_control_batch
from protocol.records.compression import CompressionType
from protocol.records.control import ControlRecordType, EndTransactionMarker
from protocol.records.conversion import downconvert, recompress_batch, upconvert_to_v2
from protocol.records.log_entry import decode_entry_records, iter_log_entries, validate_log_entry
from protocol.records.record import CompiledRecordBatch, Record, _scan_compiled, _walk_records, decode_records, \
    encode_record, encode_varint, renumber_records, scan_batch_records, scan_records

LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]


def _v2(codec: int = 0, base_offset: int = 0, count: int = 5, **kwargs) -> bytearray:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset, **kwargs)
    for i in range(count):
        builder.append(100 + i, b"k%d" % i, b"value-%d" % i * 10, [("h", b"%d" % i)])
    return builder.build()


def _legacy(magic: int, codec: int, base_offset: int = 0, count: int = 4) -> bytearray:
    builder = RecordBatchBuilder(magic=magic, compression=codec, base_offset=base_offset)
    for i in range(count):
        builder.append(100 + i, None if i == 0 else b"k%d" % i, b"v%d" % i)
    return builder.build()


def _records(buf) -> list[Record]:
    return [r for pos, _ in iter_log_entries(buf) for r in decode_entry_records(buf, pos)]


# --- count_records ------------------------------------------------------------


def test_count_records_sums_headers_and_stops_at_partial_tail() -> None:
    buf = _v2(count=3) + _v2(base_offset=3, count=4) + _v2(count=2)[:20]
    assert batch.count_records(buf) == 7
    assert batch.count_records(buf, 0, len(_v2(count=3))) == 3
    assert batch.count_records(b"") == 0
    assert batch.count_records(buf, 0, len(buf) + 100) == 7  # an end past the buffer is clamped
    with pytest.raises(CorruptRecordError, match="magic"):
        batch.count_records(_legacy(1, 0))


# --- recompression ------------------------------------------------------------

PRESERVED_FIELDS = (
    "base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp", "max_timestamp",
    "producer_id", "producer_epoch", "base_sequence", "record_count", "timestamp_type", "is_transactional",
)


@settings(max_examples=25, deadline=None)
@given(source=st.sampled_from(list(CompressionType)), target=st.sampled_from(list(CompressionType)))
def test_recompress_keeps_everything_but_the_codec(source: int, target: int) -> None:
    original = _v2(source, base_offset=77, producer_id=5, producer_epoch=2, base_sequence=9,
                   is_transactional=True, partition_leader_epoch=4)
    batch.set_log_append_time(original, 0, 123456)
    prefix = b"\xee" * 10  # the batch need not start the buffer
    out = recompress_batch(prefix + original, len(prefix), target)
    before, after = validate_log_entry(original), validate_log_entry(out)
    assert after.compression == target
    for name in PRESERVED_FIELDS:
        assert getattr(after, name) == getattr(before, name), name
    assert decode_entry_records(out) == decode_entry_records(original)


def test_recompress_control_batch_and_bad_framing() -> None:
    control = build_control_batch(EndTransactionMarker(ControlRecordType.ABORT, 1), producer_id=1,
                                  producer_epoch=0, timestamp=1)
    out = recompress_batch(control, 0, CompressionType.ZSTD)
    assert validate_log_entry(out).is_control and decode_entry_records(out) == decode_entry_records(control)
    wrong_count = bytearray(_v2(count=2))
    struct.pack_into(">i", wrong_count, batch.RECORD_COUNT_OFFSET, 3)
    with pytest.raises(CorruptRecordError):
        recompress_batch(wrong_count, 0, CompressionType.GZIP)
    with pytest.raises(CorruptRecordError):
        recompress_batch(_v2(), 0, 6)


def test_scan_records_checks_framing_and_reads_offsets_keys_and_timestamps() -> None:
    data = encode_record(0, 5, b"k", b"v") + encode_record(1, -3, None, None) + encode_record(2, 300, b"", b"v")
    scan = scan_records(data, 3, timestamps=True, keys=True)
    assert (scan.consecutive, scan.keyless, scan.timestamp_deltas) == (True, [1], [5, -3, 300])
    assert (scan_records(data, 3).timestamp_deltas, scan_records(data, 3).keyless) == ([], [])
    for bad_count in (2, 4):
        with pytest.raises(CorruptRecordError):
            scan_records(data, bad_count)
    for bad in (b"\x00", b"\x02\x00"):  # a zero-length record, one that ends inside its fields
        with pytest.raises(CorruptRecordError):
            scan_records(bad, 1)
    gaps = encode_record(0, 0, b"a", b"1") + encode_record(0, 0, b"b", b"2") + encode_record(2, 0, b"c", b"3")
    assert not scan_records(gaps, 3).consecutive
    renumbered = renumber_records(gaps, 3)
    assert scan_records(renumbered, 3).consecutive
    assert [(r.offset, r.key, r.value) for r in decode_records(renumbered, 3, 10, 0)] == \
        [(10, b"a", b"1"), (11, b"b", b"2"), (12, b"c", b"3")]


def _record(body: bytes) -> bytes:
    """One record of ``body`` (attributes onwards) behind its length."""
    return encode_varint(len(body)) + body


# attributes 0, timestamp delta 0, offset delta 0, then key, value and headers
_FIELDS = b"\x00\x00\x00"


@pytest.mark.parametrize("data, why", [
    (_record(_FIELDS + encode_varint(1) + b"k" + encode_varint(2) + b"v" + b"\x00"), "value size past the record"),
    (_record(_FIELDS + encode_varint(1) + b"k" + encode_varint(1) + b"v" + b"\x00\x00"), "a byte left in the record"),
    (_record(_FIELDS + b"\x01\x01" + encode_varint(-2)), "a negative header count"),
    (_record(_FIELDS + b"\x01\x01" + encode_varint(1)), "a header count past the record"),
    (_record(_FIELDS + b"\x01\x01" + encode_varint(1) + encode_varint(-1) + b"\x01"), "a null header key"),
    (encode_varint(40) + _FIELDS + b"\x01\x01\x00", "a record length past the batch"),
    (_record(_FIELDS + b"\x01\x01\x00") + b"\x00", "bytes after the last record"),
    (_record(_FIELDS + b"\x01\x01\x00")[:-2], "a truncated record"),
    (b"\x00", "a record of zero bytes"),
])
def test_records_whose_fields_do_not_add_up_are_malformed(data: bytes, why: str) -> None:
    """What Kafka's DefaultRecord.readFrom and its batch iterator throw InvalidRecordException for."""
    with pytest.raises(MalformedRecordError):
        scan_records(data, 1)
    good = _record(_FIELDS + b"\x01\x01\x00")
    with pytest.raises(MalformedRecordError):  # with two records, the compiled reader's turn
        scan_records(good + data, 2)
    for count, records in ((1, data), (2, good + data)):  # in place, with a well-formed record after the batch
        in_a_request = _batch_of(records, count) + good
        with pytest.raises(MalformedRecordError):
            scan_batch_records(in_a_request, 0, batch.read_batch_header(in_a_request, 0))


def test_scan_reads_headers_negative_sizes_as_null_and_long_offset_deltas() -> None:
    headers = _record(_FIELDS + b"\x01\x01" + encode_varint(2) + encode_varint(1) + b"h" + encode_varint(-1)
                      + encode_varint(1) + b"i" + encode_varint(2) + b"vv")
    null_key = _record(b"\x00\x00\x02" + encode_varint(-7) + encode_varint(-3) + b"\x00")  # Kafka: any negative is null
    scan = scan_records(headers + null_key, 2, keys=True)
    assert (scan.consecutive, scan.keyless) == (True, [0, 1])
    many = b"".join(encode_record(i, i, None, b"x" * (i % 200)) for i in range(9000))  # deltas of 1, 2 and 3 bytes
    scan = scan_records(many, 9000, keys=True)
    assert scan.consecutive and len(scan.keyless) == 9000
    redundant = _record(b"\x00\x00\x80\x00\x01\x01\x00")  # offset delta 0 in two bytes: still 0, as Java reads it
    assert scan_records(redundant, 1).consecutive


def test_recompression_renumbers_offset_deltas_that_are_not_consecutive() -> None:
    records = encode_record(0, 0, b"a", b"1") + encode_record(0, 1, b"b", b"2") + encode_record(2, 2, b"c", b"3")
    raw = bytearray(batch.RECORD_BATCH_OVERHEAD + len(records))
    batch.HEADER_STRUCT.pack_into(raw, 0, 0, len(raw) - 12, -1, 2, 0, 0, 2, 1000, 1002, -1, -1, -1, 3)
    raw[batch.RECORD_BATCH_OVERHEAD:] = records
    batch.update_crc(raw, 0)
    out = recompress_batch(raw, 0, CompressionType.LZ4)
    assert [(r.offset, r.timestamp, r.key) for r in decode_entry_records(out)] == \
        [(0, 1000, b"a"), (1, 1001, b"b"), (2, 1002, b"c")]


# --- up-conversion ------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("magic", [0, 1])
def test_upconvert_legacy_to_one_v2_batch(magic: int, codec: int) -> None:
    legacy = _legacy(magic, codec, count=3) + _legacy(magic, codec, base_offset=3, count=2)
    out = upconvert_to_v2(legacy, base_offset=1000)
    header = validate_log_entry(out)
    assert header.size == len(out) and header.magic == 2
    assert header.compression == codec and header.record_count == 5 and header.base_offset == 1000
    records = decode_entry_records(out)
    expected = _records(legacy)
    assert [r.offset for r in records] == list(range(1000, 1005))
    assert [(r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (r.timestamp, r.key, r.value, []) for r in expected
    ]
    if magic == 0:
        assert header.base_timestamp == -1 and header.max_timestamp == -1


def test_upconvert_with_target_codec_and_log_append_time_wrapper() -> None:
    builder = RecordBatchBuilder(magic=1, compression=CompressionType.GZIP, timestamp_type=LOG_APPEND_TIME,
                                 log_append_time=777)
    for i in range(3):
        builder.append(i, None, b"x")
    out = upconvert_to_v2(builder.build(), compression=CompressionType.ZSTD)
    assert validate_log_entry(out).compression == CompressionType.ZSTD
    assert [r.timestamp for r in decode_entry_records(out)] == [777, 777, 777]


def test_upconvert_bounds_the_decompressed_size_of_the_whole_set() -> None:
    legacy = b"".join(
        _legacy_payload(base_offset=i, value=b"\0" * 600_000) for i in range(3)
    )
    assert len(upconvert_to_v2(legacy, max_output=2_000_000)) > 0
    with pytest.raises(CorruptRecordError, match="exceeds"):
        upconvert_to_v2(legacy, max_output=1_500_000)  # each wrapper alone fits


def _legacy_payload(base_offset: int, value: bytes) -> bytearray:
    builder = RecordBatchBuilder(magic=1, compression=CompressionType.GZIP, base_offset=base_offset)
    builder.append(0, None, value)
    return builder.build()


def test_upconvert_rejects_v2_partial_and_corrupt_input() -> None:
    with pytest.raises(CorruptRecordError, match="magic 2"):
        upconvert_to_v2(_v2())
    legacy = _legacy(1, 0)
    with pytest.raises(CorruptRecordError, match="partial"):
        upconvert_to_v2(legacy[:-3])
    legacy[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        upconvert_to_v2(legacy)
    assert upconvert_to_v2(b"") == bytearray()


# --- down-conversion ----------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("magic", [0, 1])
def test_downconvert_v2_keeps_offsets_and_codec(magic: int, codec: int) -> None:
    source = _v2(codec, base_offset=50, count=4) + _v2(codec, base_offset=54, count=3)
    out = downconvert(source, magic)
    entries = list(iter_log_entries(out))
    assert {h.magic for _, h in entries} == {magic} and {h.compression for _, h in entries} == {codec}
    for pos, _ in entries:
        validate_log_entry(out, pos)
    records, originals = _records(out), _records(source)
    assert [(r.offset, r.key, r.value) for r in records] == [(r.offset, r.key, r.value) for r in originals]
    assert [r.timestamp for r in records] == [r.timestamp if magic else -1 for r in originals]


def test_downconvert_drops_control_batches_and_records_below_first_offset() -> None:
    control = build_control_batch(EndTransactionMarker(ControlRecordType.COMMIT, 1), producer_id=1,
                                  producer_epoch=0, timestamp=1, base_offset=5)
    legacy = _legacy(0, 0, base_offset=6, count=1)
    source = _v2(CompressionType.GZIP, base_offset=0, count=5) + control + legacy
    out = downconvert(source, 1, first_offset=3)
    assert [r.offset for r in _records(out)] == [3, 4, 6]
    assert out.endswith(legacy)  # entries already at or below the target magic are copied


def test_downconvert_log_append_time_and_zstd() -> None:
    source = _v2(CompressionType.SNAPPY, count=2)
    batch.set_log_append_time(source, 0, 999)
    (pos, header), = iter_log_entries(downconvert(source, 1))
    assert header.timestamp_type == 1 and header.max_timestamp == 999
    with pytest.raises(UnsupportedCompressionError):
        downconvert(_v2(CompressionType.ZSTD), 1)


def test_downconvert_rejects_values_outside_int64() -> None:
    builder = RecordBatchBuilder()
    builder.append(0, None, b"a")
    builder.append(10, None, b"b")  # timestamp delta 10
    data = builder.build()
    struct.pack_into(">q", data, batch.BASE_TIMESTAMP_OFFSET, 2**63 - 5)
    batch.update_crc(data, 0)
    with pytest.raises(CorruptRecordError, match="int64"):
        downconvert(data, 1)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=30)),
                    min_size=1, max_size=10),
    codec=st.sampled_from(LEGACY_CODECS),
    magic=st.sampled_from([0, 1]),
    base_offset=st.integers(0, 2**40),
)
def test_downconvert_then_upconvert_round_trip(values, codec, magic, base_offset) -> None:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for i, (key, value) in enumerate(values):
        builder.append(1000 + i, key, value)
    source = builder.build()
    legacy = downconvert(source, magic)
    restored = upconvert_to_v2(legacy, base_offset=base_offset)
    assert validate_log_entry(restored).compression == codec
    expected = [
        Record(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in decode_entry_records(source)
    ]
    assert decode_entry_records(restored) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9000), st.integers(-(2**40), 2**40), st.none() | st.binary(max_size=300),
                          st.none() | st.binary(max_size=9000),
                          st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=200)), max_size=3)),
                max_size=30), st.booleans())
def test_scan_records_agrees_with_decoding(records: list[tuple[int, int, bytes | None, bytes | None, list]],
                                           in_order: bool) -> None:
    deltas = list(range(len(records))) if in_order else [r[0] for r in records]
    data = b"".join(encode_record(d, ts, key, value, headers)
                    for d, (_, ts, key, value, headers) in zip(deltas, records, strict=True))
    decoded = decode_records(data, len(records), 0, 0)
    for scan in (scan_records(data, len(records), timestamps=True, keys=True),
                 _walk_records(data, len(records), True, True)):  # the compiled reader, then the walk in Python
        assert scan.consecutive == ([r.offset for r in decoded] == list(range(len(records))))
        assert scan.keyless == [i for i, r in enumerate(decoded) if r.key is None]
        assert scan.timestamp_deltas == [r.timestamp for r in decoded]


def test_the_walk_in_python_answers_where_the_compiled_reader_refuses() -> None:
    """Java reads header keys that are not UTF-8 without complaint; aiokafka's reader refuses them."""
    assert CompiledRecordBatch is not None, "aiokafka's compiled record reader is a dependency"
    record = _record(_FIELDS + b"\x01\x01" + encode_varint(1) + encode_varint(1) + b"\xff" + encode_varint(-1))
    two = _batch_of(record * 2, 2)
    assert _scan_compiled(two, 2, False, False, 0, 0) is None
    assert scan_records(record * 2, 2).consecutive is False  # both deltas are 0
    assert scan_batch_records(two, 0, batch.read_batch_header(two, 0)).consecutive is False
    with pytest.raises(MalformedRecordError):  # the walk still decides what is malformed
        scan_records(record + record[:-1], 2)


def _batch_of(data: bytes, count: int, base_offset: int = 0, base_timestamp: int = 0) -> bytearray:
    """An uncompressed v2 batch of ``count`` records ``data`` (CRC not set: nothing here checks it)."""
    out = bytearray(batch.RECORD_BATCH_OVERHEAD) + data
    batch.HEADER_STRUCT.pack_into(out, 0, base_offset, len(out) - batch.LOG_OVERHEAD, -1, 2, 0, 0, count - 1,
                                  base_timestamp, base_timestamp, -1, -1, -1, count)
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**40), 2**40), st.none() | st.binary(max_size=50)), min_size=1, max_size=20),
       st.integers(0, 2**40), st.integers(-(2**40), 2**40), st.booleans())
def test_a_batch_is_read_where_it_lies_as_its_bare_records_are(records: list[tuple[int, bytes | None]],
                                                               base_offset: int, base_timestamp: int,
                                                               in_order: bool) -> None:
    data = b"".join(encode_record(i if in_order else 0, ts, key, b"v") for i, (ts, key) in enumerate(records))
    records_batch = _batch_of(data, len(records), base_offset, base_timestamp)
    header = batch.read_batch_header(records_batch, 0)
    in_a_request = memoryview(b"\x02" + records_batch + b"\x02\x00")  # more bytes on both sides
    whole = scan_batch_records(in_a_request, 1, header, timestamps=True, keys=True)
    bare = scan_records(data, len(records), timestamps=True, keys=True)
    assert (whole.consecutive, whole.keyless, whole.timestamp_deltas) == \
        (bare.consecutive, bare.keyless, bare.timestamp_deltas)
    assert bare.timestamp_deltas == [ts for ts, _ in records]
