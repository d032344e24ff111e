"""Batch-level operations on RecordBatch v2 bytes, without decoding records.

These are the broker's hot path: a produce request's batches are validated
(framing + CRC-32C), re-based to their log offsets in place and appended; the
records inside are never touched. All offsets and sizes follow Kafka's
DefaultRecordBatch layout (see ON_DISK_FORMAT.md section 2).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, Union

from crc32c import crc32c

from protocol.exceptions import CorruptRecordError

Buffer = Union[bytes, bytearray, memoryview]
WritableBuffer = Union[bytearray, memoryview]

LOG_OVERHEAD: Final = 12  # baseOffset int64 + batchLength int32, common to every magic
BATCH_LENGTH_OFFSET: Final = 8
MAGIC_OFFSET: Final = 16
RECORD_BATCH_OVERHEAD: Final = 61
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21  # the CRC covers [ATTRIBUTES_OFFSET, end of batch)
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
RECORD_COUNT_OFFSET: Final = 57

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
DELETE_HORIZON_FLAG_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_STRUCT: Final = _HEADER  # all 61 header bytes, in field order, for builders
_LOG_OVERHEAD = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_BYTE = struct.Struct(">b")


class BatchHeader:
    """The 61-byte header of a v2 record batch, as plain attributes."""

    __slots__ = (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
    )

    def __init__(
        self,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
    ) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.record_count = record_count

    @property
    def size(self) -> int:
        """Total bytes of the batch, including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at Int32.MAX as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        seq = self.base_sequence + self.last_offset_delta
        return seq - 0x80000000 if seq > 0x7FFFFFFF else seq

    def __repr__(self) -> str:
        return (
            f"BatchHeader(base_offset={self.base_offset}, size={self.size}, "
            f"last_offset={self.last_offset}, records={self.record_count}, "
            f"attributes={self.attributes:#x}, producer_id={self.producer_id})"
        )


def read_magic(buf: Buffer, pos: int = 0) -> int:
    """The magic byte of the log entry at ``pos`` (it sits at +16 for every format)."""
    if len(buf) - pos < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"log entry at position {pos} is shorter than its magic byte")
    return _BYTE.unpack_from(buf, pos + MAGIC_OFFSET)[0]


def read_batch_header(buf: Buffer, pos: int = 0, *, check_size: bool = True, check_crc: bool = False) -> BatchHeader:
    """Parse the v2 batch header at ``pos``; checks framing, and with ``check_crc`` the CRC too.

    With ``check_size=False`` only the 61 header bytes must be in ``buf``: the batch may run
    past its end, as when stepping through a file by headers read in small windows (no CRC
    check then).
    """
    available = len(buf) - pos
    if available < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at position {pos} is truncated: {available} bytes, "
            f"need at least {RECORD_BATCH_OVERHEAD}"
        )
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"record batch at position {pos} has magic {header.magic}, expected 2")
    batch_length = header.batch_length
    if batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at position {pos} has batchLength {batch_length}, "
            f"below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
        )
    if check_size and batch_length + LOG_OVERHEAD > available:
        raise CorruptRecordError(
            f"record batch at position {pos} is truncated: batchLength {batch_length} "
            f"runs past the {available} bytes available"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError(
            f"record batch at position {pos} has negative lastOffsetDelta/recordCount"
        )
    if check_crc:
        # compute_crc, inlined: this runs once per produced batch
        actual = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + batch_length + LOG_OVERHEAD])
        if actual != header.crc:
            raise CorruptRecordError(
                f"record batch at position {pos} failed its CRC check: "
                f"stored {header.crc:#010x}, computed {actual:#010x}"
            )
    return header


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of the batch at ``pos`` over the bytes the stored CRC covers."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def is_crc_valid(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def validate_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Header plus CRC check; raises CorruptRecordError naming the position on failure."""
    return read_batch_header(buf, pos, check_crc=True)


def iter_batch_positions(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """Yield ``(position, size)`` of each complete log entry (any magic) in ``buf[start:end]``.

    Stops silently at a partial trailing entry, as Kafka's readers do; raises
    CorruptRecordError for a size field that cannot be valid.
    """
    limit = len(buf) if end is None else min(end, len(buf))
    pos = start
    unpack = _LOG_OVERHEAD.unpack_from
    while limit - pos >= LOG_OVERHEAD:
        _, length = unpack(buf, pos)
        if length < 0:
            raise CorruptRecordError(f"log entry at position {pos} has negative size {length}")
        size = length + LOG_OVERHEAD
        if pos + size > limit:
            return
        yield pos, size
        pos += size


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Re-base a v2 batch in place; the field lies outside the CRC."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place; the field lies outside the CRC."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as its max timestamp, and re-CRC it.

    Per-record timestamp deltas are left alone: readers of a LogAppendTime batch
    use the batch's max timestamp for every record.
    """
    attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    update_crc(buf, pos)


def update_crc(buf: WritableBuffer, pos: int) -> int:
    """Recompute and store the CRC of the batch at ``pos`` after a covered field changed."""
    size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    crc = compute_crc(buf, pos, size)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


def count_records(buf: Buffer, start: int = 0, end: int | None = None) -> int:
    """Total recordCount of the complete v2 batches in ``buf[start:end]``, read from headers only."""
    return sum(read_batch_header(buf, pos).record_count for pos, _ in iter_batch_positions(buf, start, end))
