"""The per-record work of the cleaner, on the raw record bytes of a v2 batch.

Two scans, each one tight loop per batch with the common varint sizes inlined and no Record
objects (the record framing is spelled out in both on purpose: a shared helper called per
record costs a quarter of the cleaner's time): ``index_keys`` puts each keyed record's offset into the offset map (building the
map), ``select_records`` decides which records a cleaned copy keeps (Kafka's
shouldRetainRecord). ``rebuild_batch`` then writes the kept records as Kafka's
MemoryRecordsBuilder does when the cleaner rewrites a batch: same base offset, last offset
delta, producer fields, leader epoch and codec; records keep their offset deltas (gaps are
fine); the base timestamp is the first kept record's timestamp, or the delete horizon when
the batch holds tombstones or a removable marker (attribute bit 6).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Buffer,
    update_crc,
)
from protocol.records.compression import CompressionType, compress, decompress
from protocol.records.record import encode_varint, read_varint

_NULL_LENGTH = 0x01  # zig-zag varint of -1: a null key or value


class BatchRetention(enum.Enum):
    """Kafka's RecordFilter.BatchRetention."""

    DELETE = "delete"  # drop the batch without looking at its records
    RETAIN_EMPTY = "retain_empty"  # keep at least the header, even with no records left
    DELETE_EMPTY = "delete_empty"  # drop the batch if no record is kept


def record_data(view: Buffer, header: BatchHeader, max_output: int) -> bytes:
    """The uncompressed record bytes of the v2 batch in ``view``."""
    body = view[RECORD_BATCH_OVERHEAD : header.size]
    if header.compression == CompressionType.NONE:
        return bytes(body)
    return decompress(header.compression, body, max_output=max_output)


def index_keys(
    data: bytes, count: int, base_offset: int, start_offset: int, entries: dict[bytes, int], max_entries: int
) -> tuple[int, bool]:
    """Put ``key -> offset`` for each keyed record at or after ``start_offset``.

    Returns (offset of the last record put or -1, whether the map filled up first); like
    Kafka, a full map stops before the next put even when that key is already in it.
    """
    last = -1
    pos = 0
    # Only a batch that could fill the map needs the per-record size check.
    unbounded = len(entries) + count <= max_entries
    try:
        for _ in range(count):
            b = data[pos]  # record length, usually one or two varint bytes
            if b < 0x80:
                end = pos + 1 + ((b >> 1) ^ -(b & 1))
                pos += 2  # length byte, attributes
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    end = pos + 2 + ((v >> 1) ^ -(v & 1))
                    pos += 3
                else:
                    length, pos = read_varint(data, pos)
                    end = pos + length
                    pos += 1
            if data[pos] < 0x80:  # timestamp delta: skipped
                pos += 1
            else:
                pos += 1
                while data[pos] >= 0x80:
                    pos += 1
                pos += 1
            b = data[pos]  # offset delta: two bytes from the 65th record of a batch on
            if b < 0x80:
                offset = base_offset + ((b >> 1) ^ -(b & 1))
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (b & 0x7F) | (data[pos + 1] << 7)
                offset = base_offset + ((v >> 1) ^ -(v & 1))
                pos += 2
            else:
                delta, pos = read_varint(data, pos)
                offset = base_offset + delta
            b = data[pos]  # key length
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_length, pos = read_varint(data, pos)
            if key_length >= 0 and offset >= start_offset:
                if not unbounded and len(entries) >= max_entries:
                    return last, True
                entries[data[pos : pos + key_length]] = offset
                last = offset
            pos = end
    except IndexError:
        raise CorruptRecordError(f"record data of the batch at offset {base_offset} is truncated") from None
    if pos != len(data):
        raise CorruptRecordError(f"record data of the batch at offset {base_offset} does not match its count")
    return last, False


class Selection(NamedTuple):
    """The records a cleaned batch keeps: (timestamp position, tail position, end) each."""

    kept: list[tuple[int, int, int]]
    contains_tombstones: bool
    keyless: int  # records without a key (dropped, as Kafka counts invalid messages)


def select_records(
    data: bytes, count: int, base_offset: int, entries: dict[bytes, int], latest_offset: int,
    retain_deletes: bool,
) -> Selection:
    """Kafka's shouldRetainRecord for each record of a batch.

    Kept: records past ``latest_offset`` (beyond the offset map), and keyed records that are
    the latest for their key and either have a value or, as tombstones, are still within
    their delete horizon (``retain_deletes``).
    """
    kept: list[tuple[int, int, int]] = []
    tombstones = False
    keyless = 0
    pos = 0
    get = entries.get
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                end = pos + 1 + ((b >> 1) ^ -(b & 1))
                pos += 2
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    v = (b & 0x7F) | (b2 << 7)
                    end = pos + 2 + ((v >> 1) ^ -(v & 1))
                    pos += 3
                else:
                    length, pos = read_varint(data, pos)
                    end = pos + length
                    pos += 1
            ts_pos = pos
            if data[pos] < 0x80:
                pos += 1
            else:
                pos += 1
                while data[pos] >= 0x80:
                    pos += 1
                pos += 1
            tail = pos
            b = data[pos]
            if b < 0x80:
                offset = base_offset + ((b >> 1) ^ -(b & 1))
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (b & 0x7F) | (data[pos + 1] << 7)
                offset = base_offset + ((v >> 1) ^ -(v & 1))
                pos += 2
            else:
                delta, pos = read_varint(data, pos)
                offset = base_offset + delta
            b = data[pos]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_length, pos = read_varint(data, pos)
            if key_length >= 0:
                value_null = data[pos + key_length] == _NULL_LENGTH
                if offset > latest_offset or (
                    offset >= get(data[pos : pos + key_length], -1) and (retain_deletes or not value_null)
                ):
                    kept.append((ts_pos, tail, end))
                    tombstones = tombstones or value_null
            elif offset > latest_offset:
                kept.append((ts_pos, tail, end))
                tombstones = tombstones or data[pos] == _NULL_LENGTH
            else:
                keyless += 1
            pos = end
    except IndexError:
        raise CorruptRecordError(f"record data of the batch at offset {base_offset} is truncated") from None
    if pos != len(data):
        raise CorruptRecordError(f"record data of the batch at offset {base_offset} does not match its count")
    return Selection(kept, tombstones, keyless)


def rebuild_batch(header: BatchHeader, data: bytes, kept: list[tuple[int, int, int]], delete_horizon: int) -> bytes:
    """A copy of the batch holding only ``kept`` records (``delete_horizon``: -1 for none)."""
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    timestamps = []
    for ts_pos, _, _ in kept:
        if log_append_time:
            timestamps.append(header.max_timestamp)
        else:
            b = data[ts_pos]
            delta = (b >> 1) ^ -(b & 1) if b < 0x80 else read_varint(data, ts_pos)[0]
            timestamps.append(header.base_timestamp + delta)
    base_timestamp = delete_horizon if delete_horizon != NO_TIMESTAMP else timestamps[0]
    parts = []
    for (_, tail, end), timestamp in zip(kept, timestamps):
        body_length = 1 + (end - tail)
        ts_delta = encode_varint(timestamp - base_timestamp)
        parts.append(encode_varint(body_length + len(ts_delta)))
        parts.append(b"\x00")
        parts.append(ts_delta)
        parts.append(data[tail:end])
    records = b"".join(parts)
    codec = header.compression
    if codec != CompressionType.NONE:
        records = compress(codec, records)
    max_timestamp = header.max_timestamp if log_append_time else max(timestamps)
    attributes = header.attributes & (0x07 | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    if delete_horizon != NO_TIMESTAMP:
        attributes |= DELETE_HORIZON_FLAG_MASK
    out = bytearray(RECORD_BATCH_OVERHEAD + len(records))
    HEADER_STRUCT.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0, attributes,
        header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, len(kept),
    )
    out[RECORD_BATCH_OVERHEAD:] = records
    update_crc(out, 0)
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka's writeEmptyHeader: a header-only batch kept for its producer state or last offset."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    out = bytearray(RECORD_BATCH_OVERHEAD)
    HEADER_STRUCT.pack_into(
        out, 0, header.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
        attributes, header.last_offset_delta, NO_TIMESTAMP, header.max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, 0,
    )
    update_crc(out, 0)
    return bytes(out)
