"""Produce-side record checks and conversions, before the log's own append validation.

The request-level part of Kafka's ProduceRequest.validateRecords and LogValidator's record-level
checks and slow paths (storage.log_validator does the append-time checks and offset assignment).

Per batch: framing and CRC of every entry, Produce v3+ rules (exactly one magic 2 batch, zstd only
from v7), record count against the offset range. Then every record, compressed or not, as Kafka's
record iterator reads it (``scan_records``: its fields must add up to its length and the records
must fill the batch, else INVALID_RECORD, as Kafka 3.9 answers a CRC-valid batch of malformed
records), with what else Kafka checks per record: consecutive inner offsets of compressed batches,
a key for every record of a compacted topic, timestamps the topic bounds
(message.timestamp.before/after.max.ms) and producer-set LogAppendTime. Failing records are
reported one by one (KIP-467). Then the slow paths:
legacy message sets (Produce v0-2) are up-converted to one v2 batch, and batches whose codec differs
from the topic's compression.type are recompressed, their inner offsets renumbered if need be.
"""

from __future__ import annotations

import struct
import time
from typing import Union

from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import CorruptRecordError, MalformedRecordError, UnsupportedCompressionError
from protocol.records.batch import BATCH_LENGTH_OFFSET, COMPRESSION_CODEC_MASK, LOG_OVERHEAD, MAGIC_OFFSET, \
    NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, BatchHeader, iter_batch_positions, read_batch_header
from protocol.records.compression import CompressionType
from protocol.records.conversion import recompress_batch, upconvert_to_v2
from protocol.records.log_entry import LogEntryHeader, validate_log_entry
from protocol.records.record import batch_record_data, decode_records, scan_batch_records
from storage.log_config import LogConfig
from storage.log_validator import Batches

Buffer = Union[bytearray, memoryview]

TOPIC_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
ZSTD_MIN_PRODUCE_VERSION = 7
MAX_LISTED_RECORD_ERRORS = 3  # Kafka's message lists the first three
_LENGTH = struct.Struct(">i")


class RecordValidationError(KafkaApiError):
    """Records Kafka refuses. ``record_errors`` (index in the batch, message) are KIP-467's
    per-record errors, and only with them does Kafka's answer carry a message; ``at_append`` says
    Kafka finds it while appending, when its answer carries the partition's log start offset."""

    def __init__(self, error: Errors, message: str, record_errors: list[tuple[int, str]] | None = None,
                 at_append: bool = False) -> None:
        super().__init__(error, message)
        self.record_errors = record_errors or []
        self.at_append = at_append or bool(record_errors)


def _entries(records: Buffer) -> list[tuple[int, LogEntryHeader]]:
    size = len(records)
    try:
        if size >= RECORD_BATCH_OVERHEAD and records[MAGIC_OFFSET] == 2 \
                and _LENGTH.unpack_from(records, BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD == size:
            return [(0, read_batch_header(records, 0, check_crc=True))]  # one v2 batch, as Produce v3+ carries
        entries = []
        end = 0
        for position, length in iter_batch_positions(records):
            entries.append((position, validate_log_entry(records, position)))
            end = position + length
    except CorruptRecordError as exc:
        raise RecordValidationError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
    if end != size:
        raise RecordValidationError(Errors.CORRUPT_MESSAGE,
                                    f"{size - end} trailing bytes after the last complete batch")
    return entries


def validate_records(records: Buffer | None, produce_version: int, config: LogConfig,
                     topic_partition: str) -> tuple[Buffer, Batches | None]:
    """The records to append (the request's own buffer when no rewrite is needed), framing and CRCs
    checked, and their batches as parsed here (None for recompressed records), for the log's append."""
    if records is None or len(records) == 0:
        return bytearray(), []
    entries = _entries(records)
    target = TOPIC_CODECS.get(config.compression_type)  # None: keep the producer's codec
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
                f"records {header.record_count}", at_append=True)
        if header.compression == CompressionType.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
            raise RecordValidationError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                                        "Produce requests below version 7 cannot carry zstd batches")
    scan_all = config.checks_each_record
    for position, header in entries:
        assert isinstance(header, BatchHeader)
        if scan_all or header.attributes & (COMPRESSION_CODEC_MASK | TIMESTAMP_TYPE_MASK):
            _check_records(records, position, header, config, target, topic_partition)
        else:  # the usual batch: nothing but the records' structure to check
            _check_structure(records, position, header)
    if target is not None and any(h.compression != target for _, h in entries):
        return _recompress(records, entries, target), None
    return records, entries


def _check_structure(records: Buffer, position: int, header: BatchHeader) -> None:
    """Every record of an uncompressed batch read as Kafka's record iterator reads it."""
    try:
        scan_batch_records(records, position, header)
    except MalformedRecordError as exc:  # Kafka's InvalidRecordException
        raise RecordValidationError(Errors.INVALID_RECORD, str(exc), at_append=True) from exc


def _check_records(records: Buffer, position: int, header: BatchHeader, config: LogConfig,
                   target: CompressionType | None, topic_partition: str) -> None:
    """LogValidator's per-record checks: every record read, its structure checked, then what applies."""
    producer_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    create_time = not config.log_append_time
    bounded = config.bounds_create_time
    compressed = header.compression != CompressionType.NONE
    # Kafka rejects LogAppendTime from producers only where it cannot take the batch's time instead.
    bad_append_time = producer_append_time and (not create_time or header.max_timestamp == NO_TIMESTAMP)
    try:
        scan = scan_batch_records(records, position, header, timestamps=bounded and not producer_append_time,
                                  keys=config.compact_enabled)
    except MalformedRecordError as exc:  # Kafka's InvalidRecordException, from its record iterator
        raise RecordValidationError(Errors.INVALID_RECORD, str(exc), at_append=True) from exc
    except (CorruptRecordError, UnsupportedCompressionError) as exc:
        raise RecordValidationError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
    errors: dict[int, tuple[Errors, str]] = {}
    if config.compact_enabled:
        message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
        errors.update((index, (Errors.INVALID_RECORD, message)) for index in scan.keyless)
    in_place = target in (None, header.compression)
    if bad_append_time:
        data = batch_record_data(records, position, header=header)
        for index, description in enumerate(_describe_records(data, header, partial=compressed and in_place)):
            errors.setdefault(index, (Errors.INVALID_TIMESTAMP, f"Invalid timestamp type in message {description}. "
                                                                 "Producer should not set timestamp type to LogAppendTime."))
    elif bounded:
        _check_timestamps(header, scan.timestamp_deltas, producer_append_time, config.timestamp_before_max_ms,
                          config.timestamp_after_max_ms, errors)
    if errors:
        _raise_record_errors(errors)
    if compressed and not scan.consecutive and in_place:
        # Kafka 3.9 validates such a batch in place, then fails rebuilding it: its answer is this error.
        raise RecordValidationError(Errors.UNKNOWN_SERVER_ERROR, "inner offsets of a compressed batch are not "
                                    "consecutive", at_append=True)


def _java_long(value: int) -> int:
    """Kafka's bounds are Java longs: now + Long.MAX_VALUE wraps around, in its messages too."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _check_timestamps(header: BatchHeader, deltas: list[int], producer_append_time: bool, before_ms: int,
                      after_ms: int, errors: dict[int, tuple[Errors, str]]) -> None:
    """LogValidator.validateTimestamp for CreateTime topics: records too old or too far ahead."""
    now = int(time.time() * 1000)
    if producer_append_time:  # every record of such a batch has the batch's time
        timestamps = [header.max_timestamp] * header.record_count
    else:
        timestamps = [header.base_timestamp + delta for delta in deltas]
    low, high = _java_long(now - before_ms), _java_long(now + after_ms)
    for index, timestamp in enumerate(timestamps):
        if timestamp == NO_TIMESTAMP or index in errors:
            continue
        difference = _java_long(now - timestamp)
        if difference > before_ms or -difference > after_ms:
            errors[index] = (Errors.INVALID_TIMESTAMP,
                             f"Timestamp {timestamp} of message with offset {header.base_offset + index} is out of "
                             f"range. The timestamp should be within [{low}, {high}]")


def _describe_records(data: bytes, header: BatchHeader, *, partial: bool) -> list[str]:
    """Each record as Kafka's toString shows it (PartialDefaultRecord where Kafka skipped keys and values)."""
    described = []
    timestamp = header.max_timestamp
    for record in decode_records(data, header.record_count, header.base_offset, 0):
        if partial:
            key = -1 if record.key is None else len(record.key)
            value = -1 if record.value is None else len(record.value)
            described.append(f"PartialDefaultRecord(offset={record.offset}, timestamp={timestamp}, key={key} bytes, "
                             f"value={value} bytes)")
        else:
            described.append(f"DefaultRecord(offset={record.offset}, timestamp={timestamp}, "
                             f"key={len(record.key or b'')} bytes, value={len(record.value or b'')} bytes)")
    return described


def _raise_record_errors(errors: dict[int, tuple[Errors, str]]) -> None:
    """Kafka's processRecordErrors: INVALID_TIMESTAMP if any record has a bad timestamp, else INVALID_RECORD."""
    listed = sorted(errors.items())
    record_errors = [(index, message) for index, (_, message) in listed]
    if any(error == Errors.INVALID_TIMESTAMP for _, (error, _) in listed):
        raise RecordValidationError(Errors.INVALID_TIMESTAMP,
                                    "One or more records have been rejected due to invalid timestamp", record_errors)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                      for index, message in record_errors[:MAX_LISTED_RECORD_ERRORS])
    raise RecordValidationError(
        Errors.INVALID_RECORD,
        f"One or more records have been rejected due to {len(record_errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]", record_errors)


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
