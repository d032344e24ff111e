"""One view over log entries of any magic, for storage and the broker.

The magic byte sits at +16 for every format, so each entry is dispatched on it:
magic 2 entries are batch.BatchHeader, magic 0/1 entries are legacy.LegacyEntryHeader
(same attribute names where they mean something).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Union

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import (
    BatchHeader,
    Buffer,
    iter_batch_positions,
    read_batch_header,
    read_magic,
    validate_batch,
)
from protocol.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from protocol.records.legacy import (
    LegacyEntryHeader,
    decode_legacy_records,
    read_legacy_header,
    validate_legacy_entry,
)
from protocol.records.record import Record, decode_batch_records

LogEntryHeader = Union[BatchHeader, LegacyEntryHeader]


def _magic(buf: Buffer, pos: int) -> int:
    magic = read_magic(buf, pos)
    if magic not in (0, 1, 2):
        raise CorruptRecordError(f"log entry at position {pos} has unknown magic {magic}")
    return magic


def read_log_entry(buf: Buffer, pos: int = 0) -> LogEntryHeader:
    """Header of the entry at ``pos`` (framing checked, CRC not)."""
    if _magic(buf, pos) == 2:
        return read_batch_header(buf, pos)
    return read_legacy_header(buf, pos)


def validate_log_entry(buf: Buffer, pos: int = 0) -> LogEntryHeader:
    """Framing plus CRC-32C (magic 2) or CRC-32 (magic 0/1); raises CorruptRecordError naming ``pos``."""
    if _magic(buf, pos) == 2:
        return validate_batch(buf, pos)
    return validate_legacy_entry(buf, pos)


def iter_log_entries(buf: Buffer, start: int = 0, end: int | None = None) -> Iterator[tuple[int, LogEntryHeader]]:
    """``(position, header)`` for each complete entry in ``buf[start:end]``; stops at a partial tail."""
    for pos, _size in iter_batch_positions(buf, start, end):
        yield pos, read_log_entry(buf, pos)


def decode_entry_records(
    buf: Buffer, pos: int = 0, *, max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> list[Record]:
    """Every record of the entry at ``pos``: decompressed, absolute offsets, LogAppendTime applied."""
    if _magic(buf, pos) == 2:
        return decode_batch_records(buf, pos, max_output=max_output)
    return decode_legacy_records(buf, pos, max_output=max_output)
