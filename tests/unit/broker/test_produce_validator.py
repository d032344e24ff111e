"""validate_records: the one-batch shortcut answers as the general path does, and hands its
parsed batches to the log only when they describe the records to append."""

from __future__ import annotations

import pytest

from broker.produce_validator import RecordValidationError, validate_records
from protocol.errors import Errors
from protocol.records.batch import CRC_OFFSET, iter_batch_positions
from protocol.records.builder import RecordBatchBuilder
from protocol.records.compression import CompressionType
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
