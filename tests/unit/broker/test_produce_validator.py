"""validate_records: the one-batch shortcut answers as the general path does, and hands its
parsed batches to the log only when they describe the records to append."""

from __future__ import annotations

import struct

import pytest

from broker.produce_validator import RecordValidationError, validate_records
from protocol.errors import Errors
from protocol.records.batch import ATTRIBUTES_OFFSET, BATCH_LENGTH_OFFSET, CRC_OFFSET, LOG_OVERHEAD, \
    RECORD_BATCH_OVERHEAD, iter_batch_positions, update_crc
from protocol.records.builder import RecordBatchBuilder
from protocol.records.compression import CompressionType, compress
from storage.log_config import LogConfig


def _batch(count: int = 2, compression: CompressionType = CompressionType.NONE) -> bytearray:
    builder = RecordBatchBuilder(compression=compression)
    for i in range(count):
        builder.append(1_000 + i, None, b"v%d" % i)
    return bytearray(builder.build())


def test_one_batch_is_returned_with_its_parsed_header() -> None:
    records = _batch(3)
    to_append, parsed = validate_records(records, 9, LogConfig(), "t-0")
    assert to_append is records
    assert parsed is not None and [(p, h.record_count, h.size) for p, h in parsed] == [(0, 3, len(records))]


def test_several_batches_of_an_old_produce_version_are_parsed_one_by_one() -> None:
    records = _batch(1) + _batch(2)
    _, parsed = validate_records(records, 2, LogConfig(), "t-0")
    assert parsed is not None
    assert [p for p, _ in parsed] == [p for p, _ in iter_batch_positions(records)]


@pytest.mark.parametrize("damage, message", [
    (lambda b: b.__setitem__(CRC_OFFSET, b[CRC_OFFSET] ^ 0xFF), "CRC"),
    (lambda b: b.extend(b"\x00\x01"), "trailing bytes"),
    (lambda b: b.__delitem__(slice(len(b) - 3, None)), "trailing bytes"),  # a partial batch
])
def test_damaged_records_are_corrupt_messages(damage: object, message: str) -> None:
    records = _batch(2)
    damage(records)  # type: ignore[operator]
    with pytest.raises(RecordValidationError) as raised:
        validate_records(records, 9, LogConfig(), "t-0")
    assert raised.value.error is Errors.CORRUPT_MESSAGE
    assert message in str(raised.value)


def test_recompressed_records_come_without_parsed_batches() -> None:
    records = _batch(2, CompressionType.GZIP)
    to_append, parsed = validate_records(records, 9, LogConfig.from_props({"compression.type": "lz4"}), "t-0")
    assert parsed is None and to_append is not records


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.LZ4])
def test_malformed_records_in_a_crc_valid_batch_are_invalid_records(compression: CompressionType) -> None:
    """Kafka 3.9 reads every record of every produced batch, compressed or not, and answers a record whose
    fields run past its length with INVALID_RECORD and the log start offset (no record errors, no message)."""
    builder = RecordBatchBuilder()
    builder.append(1_000, None, b"v0")
    plain = builder.build()
    data = bytearray(plain[RECORD_BATCH_OVERHEAD:])
    assert data[-4:] == b"\x04v0\x00"  # the value size, the value, no headers
    data[-4] = 6  # a value of three bytes in a record with room for two
    records = bytearray(plain[:RECORD_BATCH_OVERHEAD]) + compress(compression, bytes(data), magic=2)
    struct.pack_into(">i", records, BATCH_LENGTH_OFFSET, len(records) - LOG_OVERHEAD)
    struct.pack_into(">h", records, ATTRIBUTES_OFFSET, compression)
    update_crc(records, 0)
    with pytest.raises(RecordValidationError) as raised:
        validate_records(records, 9, LogConfig(), "t-0")
    assert raised.value.error is Errors.INVALID_RECORD
    assert raised.value.at_append and raised.value.record_errors == []
