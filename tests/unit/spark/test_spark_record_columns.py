"""spark_jobs.record_columns against protocol.records' record-by-record decoder on the same batches."""
from __future__ import annotations

from typing import Optional

import pytest

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import read_batch_header
from protocol.records.builder import LOG_APPEND_TIME, RecordBatchBuilder
from protocol.records.compression import CompressionType
from protocol.records.record import batch_record_data, decode_records, encode_record
from spark_jobs.record_columns import decode_columns

BASE_TS = 1_700_000_000_000
Row = tuple[Optional[bytes], Optional[bytes]]


def _batch(rows: list[Row], codec: int = CompressionType.NONE, log_append_time: Optional[int] = None,
           timestamps: Optional[list[int]] = None) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=1000,
                                 timestamp_type=LOG_APPEND_TIME if log_append_time else 0,
                                 log_append_time=log_append_time or -1)
    for i, (key, value) in enumerate(rows):
        builder.append(timestamps[i] if timestamps else BASE_TS + 37 * i, key, value)
    return builder.build()


def _both(batch: bytes):
    header = read_batch_header(batch)
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    args = (batch_record_data(batch), header.record_count, header.base_offset, header.base_timestamp, log_append_time)
    return decode_columns(*args), decode_records(*args)


def _assert_same(batch: bytes) -> None:
    columns, records = _both(batch)
    assert columns is not None
    assert columns.keys.to_pylist() == [r.key for r in records]
    assert columns.values.to_pylist() == [r.value for r in records]
    assert columns.offsets.tolist() == [r.offset for r in records]
    assert columns.timestamps.tolist() == [r.timestamp for r in records]


ROW_SETS = {
    "keys and values": [(b"k%d" % i, b"v" * (i % 300)) for i in range(200)],
    "no keys": [(None, b"value-%d" % i) for i in range(100)],
    "some null keys and tombstones": [(None if i % 3 else b"key", None if i % 4 == 0 else b"x" * i) for i in range(90)],
    "empty keys and values": [(b"", b"") for _ in range(50)],
    "all tombstones": [(b"k", None) for _ in range(40)],
    "three-byte lengths": [(b"k", b"y" * 20_000) for _ in range(3)],
    "one record": [(b"only", b"one")],
}


@pytest.mark.parametrize("rows", ROW_SETS.values(), ids=ROW_SETS.keys())
@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_same_records_as_record_decoder(rows: list[Row], codec: int) -> None:
    _assert_same(_batch(rows, codec))


def test_log_append_time_and_multibyte_deltas() -> None:
    rows = [(b"k", b"v")] * 300  # offset deltas past 63 take two bytes
    _assert_same(_batch(rows, log_append_time=BASE_TS + 5))
    _assert_same(_batch(rows, timestamps=[BASE_TS + (-1) ** i * i * 100_000 for i in range(300)]))


def test_records_with_headers_are_left_to_the_record_decoder() -> None:
    builder = RecordBatchBuilder(base_offset=0)
    for i in range(40):
        builder.append(BASE_TS, b"k", b"v", [("h", b"x")] if i == 39 else [])
    columns, records = _both(builder.build())
    assert columns is None and records[39].headers == [("h", b"x")]


def _raw(records: bytes, count: int) -> tuple:
    return records, count, 0, BASE_TS, None


GOOD = b"".join(encode_record(i, i, b"k", b"value") for i in range(40))


@pytest.mark.parametrize(
    "data, count",
    [
        (GOOD, 41),  # declares more records than there are
        (GOOD + b"\x00", 40),  # a byte after the last record
        (GOOD[:-1], 40),  # the last record cut short
        (GOOD.replace(b"\x0avalue", b"\x0cvalue", 1), 40),  # a value longer than its record
        (GOOD.replace(b"\x02k", b"\x05k", 1), 40),  # a key length of -3
        (b"\x03" + GOOD[1:], 40),  # a negative record length
        (b"\xff" * 12 + GOOD, 40),  # a varint longer than ten bytes
    ],
)
def test_malformed_records_go_to_the_record_decoder(data: bytes, count: int) -> None:
    assert decode_columns(*_raw(data, count)) is None
    with pytest.raises(CorruptRecordError):
        decode_records(*_raw(data, count))



@pytest.mark.parametrize("timestamp_delta, offset_delta", [(2**62, 0), (0, -1), (0, 2**40)])
def test_values_numpy_would_wrap_go_to_the_record_decoder(timestamp_delta: int, offset_delta: int) -> None:
    data = GOOD + encode_record(offset_delta, timestamp_delta, b"k", b"v")
    assert decode_columns(*_raw(data, 41)) is None
    assert decode_records(*_raw(data, 41))[40].timestamp == BASE_TS + timestamp_delta
