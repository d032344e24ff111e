"""Rewriting batches into another format or codec: the broker's slow paths.

- up-conversion: legacy magic 0/1 message sets from Produce v0-2 become one v2 batch;
- down-conversion: v2 batches become magic 0/1 message sets for Fetch v0-3 clients;
- recompression: a v2 batch whose codec differs from the topic's compression.type.
"""

from __future__ import annotations

import struct
from typing import Optional

from protocol.exceptions import CorruptRecordError, UnsupportedCompressionError
from protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    Buffer,
    iter_batch_positions,
    read_batch_header,
    update_crc,
)
from protocol.records.builder import LOG_APPEND_TIME, RecordBatchBuilder
from protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionType,
    compress,
    compression_type,
)
from protocol.records.legacy import build_message_set, decode_legacy_records, validate_legacy_entry
from protocol.records.log_entry import decode_entry_records, read_log_entry
from protocol.records.record import batch_record_data, renumber_records, scan_records

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def upconvert_to_v2(
    buf: Buffer,
    start: int = 0,
    end: Optional[int] = None,
    *,
    compression: Optional[int] = None,
    base_offset: int = 0,
    max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytearray:
    """One v2 batch holding every message of the legacy entries in ``buf[start:end]``.

    As Kafka's LogValidator does, messages get consecutive offsets from
    ``base_offset``; timestamps are kept (-1 for magic 0, the wrapper's time for
    LogAppendTime wrappers). ``compression`` None keeps the producer's codec.
    Every entry's CRC is checked. A trailing partial entry is corrupt here,
    because a produce request never carries one legitimately. ``max_output``
    bounds the decompressed size of the whole set.
    """
    limit = len(buf) if end is None else end
    builder: Optional[RecordBatchBuilder] = None
    consumed = start
    for pos, size in iter_batch_positions(buf, start, limit):
        header = validate_legacy_entry(buf, pos)
        if builder is None:
            codec = header.compression if compression is None else compression
            builder = RecordBatchBuilder(magic=2, compression=codec, base_offset=base_offset)
        budget = max_output - builder.uncompressed_size  # bounds the whole set, not each wrapper
        for record in decode_legacy_records(buf, pos, max_output=max(budget, 0)):
            builder.append(record.timestamp, record.key, record.value)
        consumed = pos + size
    if consumed != limit:
        raise CorruptRecordError(f"legacy message set has a partial entry at position {consumed}")
    return builder.build() if builder is not None else bytearray()


def downconvert(
    buf: Buffer,
    magic: int,
    start: int = 0,
    end: Optional[int] = None,
    *,
    first_offset: int = 0,
    max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytearray:
    """The entries of ``buf[start:end]`` rewritten for a client that reads only ``magic`` (0 or 1).

    Mirrors Kafka's RecordsUtil.downConvert: entries already at or below
    ``magic`` are copied, control batches are dropped, records below
    ``first_offset`` are left out, each converted batch keeps its codec and its
    records keep their absolute offsets. zstd batches cannot be expressed and
    raise UnsupportedCompressionError.
    """
    out = bytearray()
    view = memoryview(buf)
    for pos, size in iter_batch_positions(buf, start, end):
        header = read_log_entry(buf, pos)
        if header.magic <= magic:
            out += view[pos : pos + size]
            continue
        if header.is_control:
            continue
        if header.compression == CompressionType.ZSTD:
            raise UnsupportedCompressionError(f"a zstd batch at position {pos} cannot be down-converted")
        budget = max(max_output - len(out), 0)  # bounds the whole conversion, not each batch
        records = [r for r in decode_entry_records(buf, pos, max_output=budget) if r.offset >= first_offset]
        if not records:
            continue
        if not all(_INT64_MIN <= v <= _INT64_MAX for r in records for v in (r.offset, r.timestamp)):
            raise CorruptRecordError(f"batch at position {pos} has offsets or timestamps outside int64")
        append_time = header.max_timestamp if magic == 1 and header.timestamp_type == LOG_APPEND_TIME else None
        out += build_message_set(
            magic,
            header.compression,
            records[0].offset,
            [(r.offset, r.timestamp, r.key, r.value) for r in records],
            append_time,
        )
    return out


def recompress_batch(
    buf: Buffer, pos: int, codec: int, *, max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytearray:
    """The v2 batch at ``pos`` with its records compressed by ``codec`` instead.

    The record bytes are carried over unchanged (timestamp deltas, headers), as are
    all header fields but the codec bits, batchLength and CRC; the records' framing
    is checked on the way, and offset deltas that do not run 0..count-1 are
    renumbered, as Kafka's rebuild of a batch assigns them.
    """
    header = read_batch_header(buf, pos)
    target = compression_type(codec)
    data = batch_record_data(buf, pos, max_output=max_output)
    if not scan_records(data, header.record_count).consecutive:
        data = renumber_records(data, header.record_count)
    if target is not CompressionType.NONE:
        data = compress(target, data)
    out = bytearray(RECORD_BATCH_OVERHEAD + len(data))
    out[:RECORD_BATCH_OVERHEAD] = memoryview(buf)[pos : pos + RECORD_BATCH_OVERHEAD]
    out[RECORD_BATCH_OVERHEAD:] = data
    _INT32.pack_into(out, BATCH_LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attributes = (header.attributes & ~COMPRESSION_CODEC_MASK) | target
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, attributes)
    update_crc(out, 0)
    return out

