"""Produce-side record checks and conversions, before the log's own append validation.

The request-level part of Kafka's ProduceRequest.validateRecords and LogValidator's slow paths
(storage.log_validator does the append-time checks and offset assignment).

Per batch, not per record: framing and CRC of every entry, Produce v3+ rules (exactly one
magic 2 batch, zstd only from v7), record count against the offset range, then the slow
paths only when needed: legacy message sets (Produce v0-2) are up-converted to one v2
batch, and batches whose codec differs from the topic's compression.type are recompressed.
"""

from __future__ import annotations

from typing import Union

from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import CorruptRecordError, UnsupportedCompressionError
from protocol.records.batch import iter_batch_positions
from protocol.records.compression import CompressionType
from protocol.records.conversion import recompress_batch, upconvert_to_v2
from protocol.records.log_entry import LogEntryHeader, validate_log_entry
from protocol.records.record import decode_batch_records

Buffer = Union[bytearray, memoryview]

TOPIC_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
ZSTD_MIN_PRODUCE_VERSION = 7


class RecordValidationError(KafkaApiError):
    """Invalid records; ``record_index`` (a record within its batch) goes into Produce v8+ record
    errors, as Kafka reports per-record problems; batch-level problems carry only the message."""

    def __init__(self, error: Errors, message: str, record_index: int | None = None) -> None:
        super().__init__(error, message)
        self.record_index = record_index


def _entries(records: Buffer) -> list[tuple[int, LogEntryHeader]]:
    entries = []
    end = 0
    try:
        for position, size in iter_batch_positions(records):
            entries.append((position, validate_log_entry(records, position)))
            end = position + size
    except CorruptRecordError as exc:
        raise RecordValidationError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
    if end != len(records):
        raise RecordValidationError(Errors.CORRUPT_MESSAGE,
                                    f"{len(records) - end} trailing bytes after the last complete batch")
    return entries


def validate_records(records: Buffer | None, produce_version: int, topic_compression: str,
                     compacted: bool = False) -> Buffer:
    """The records to append (the request's own buffer when no rewrite is needed).

    ``compacted`` topics need a key on every record, the one check that has to look at records.
    """
    if records is None or len(records) == 0:
        return bytearray()
    entries = _entries(records)
    target = TOPIC_CODECS.get(topic_compression)  # None: keep the producer's codec
    if produce_version >= 3:
        if len(entries) != 1 or entries[0][1].magic != 2:
            raise RecordValidationError(
                Errors.INVALID_RECORD,
                f"Produce requests with version {produce_version} are only allowed to contain exactly one "
                f"record batch with magic version 2")
    elif any(header.magic < 2 for _, header in entries):
        try:
            records = upconvert_to_v2(records, compression=target)
        except (CorruptRecordError, UnsupportedCompressionError) as exc:
            raise RecordValidationError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
        entries = _entries(records)
    for _, header in entries:
        if header.record_count <= 0 or header.last_offset - header.base_offset + 1 != header.record_count:
            raise RecordValidationError(
                Errors.INVALID_RECORD,
                f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] and count of "
                f"records {header.record_count}")
        if header.compression == CompressionType.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
            raise RecordValidationError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                                        "Produce requests below version 7 cannot carry zstd batches")
    if compacted:
        _check_keys(records, entries)
    if target is not None and any(h.compression != target for _, h in entries):
        records = _recompress(records, entries, target)
    return records


def _check_keys(records: Buffer, entries: list[tuple[int, LogEntryHeader]]) -> None:
    for position, header in entries:
        try:
            decoded = decode_batch_records(records, position)
        except (CorruptRecordError, UnsupportedCompressionError) as exc:
            raise RecordValidationError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
        for index, record in enumerate(decoded):
            if record.key is None:
                raise RecordValidationError(Errors.INVALID_RECORD,
                                            "Compacted topic cannot accept message without key", index)


def _recompress(records: Buffer, entries: list[tuple[int, LogEntryHeader]], target: CompressionType) -> bytearray:
    out = bytearray()
    view = memoryview(records)
    for position, header in entries:
        if header.compression == target:
            out += view[position:position + header.size]
            continue
        try:
            out += recompress_batch(records, position, target)
        except (CorruptRecordError, UnsupportedCompressionError) as exc:
            raise RecordValidationError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
    return out
