"""Consistency checks of one segment and its indexes; pure Python, run per segment by `verify`.

Checks every entry's framing and CRC, that its records decode, that offsets rise and stay at or
above the segment's base; then that each .index entry points at the start of an entry holding
its offset, that .timeindex entries rise and name offsets of this segment, and that the
.txnindex is well formed. Zero-filled tails of preallocated (active segment) indexes are not
problems. A problem names the file and the byte position in it.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Optional

from protocol.exceptions import CorruptRecordError
from protocol.records.log_entry import LogEntryHeader, decode_entry_records, read_log_entry, validate_log_entry
from spark_jobs.layout import SegmentFile
from storage.errors import StorageError
from storage.log_files import TIME_INDEX_SUFFIX
from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex
from storage.transaction_index import TransactionIndex


@dataclass(frozen=True)
class Problem:
    file: str
    position: int
    kind: str
    detail: str


@dataclass(frozen=True)
class EntryInfo:
    first_offset: int
    last_offset: int


@dataclass
class SegmentReport:
    path: str
    entries: int
    records: int
    problems: list[Problem]


def _first_offset_of_damaged(header: LogEntryHeader) -> int:
    """An entry's first offset from its header; a compressed legacy wrapper only knows its last one."""
    try:
        return header.base_offset
    except CorruptRecordError:
        return header.last_offset


def _scan_log(segment: SegmentFile, buf: mmap.mmap | bytes, problems: list[Problem]) -> tuple[dict[int, EntryInfo], int]:
    starts: dict[int, EntryInfo] = {}
    records = 0
    previous_last: Optional[int] = None
    pos = 0
    size = len(buf)
    while pos < size:
        try:
            header = validate_log_entry(buf, pos)
        except CorruptRecordError as exc:
            try:
                header = read_log_entry(buf, pos)
            except CorruptRecordError:
                problems.append(Problem(segment.path, pos, "framing", f"{exc}; the rest of the segment is unreadable"))
                break
            problems.append(Problem(segment.path, pos, "crc", str(exc)))
            # The framing holds, so an entry still starts here: index entries pointing at it are sound.
            starts[pos] = EntryInfo(_first_offset_of_damaged(header), header.last_offset)
            previous_last = header.last_offset
            pos += header.size
            continue
        try:
            decoded = decode_entry_records(buf, pos)
        except CorruptRecordError as exc:
            problems.append(Problem(segment.path, pos, "records", str(exc)))
            decoded = []
        first = decoded[0].offset if decoded and header.magic < 2 else header.base_offset
        if first < segment.base_offset:
            problems.append(Problem(segment.path, pos, "offsets",
                                    f"entry offset {first} is below the segment base offset {segment.base_offset}"))
        if previous_last is not None and first <= previous_last:
            problems.append(Problem(segment.path, pos, "offsets",
                                    f"entry offset {first} does not follow the previous entry's last offset {previous_last}"))
        starts[pos] = EntryInfo(first, header.last_offset)
        previous_last = header.last_offset
        records += len(decoded)
        pos += header.size
    return starts, records


def _used_slots(index: OffsetIndex | TimeIndex, is_padding: Callable[[Any], bool]) -> int:
    """Entries before the zero-filled tail of a preallocated index."""
    used = index.entries
    while used > 1 and is_padding(index.entry(used - 1)):
        used -= 1
    return used


def _check_offset_index(segment: SegmentFile, starts: dict[int, EntryInfo], problems: list[Problem]) -> None:
    path = segment.index_path
    if not os.path.exists(path):
        return
    try:
        index = OffsetIndex(path, segment.base_offset, writable=False)
    except (OSError, StorageError, ValueError) as exc:
        problems.append(Problem(path, 0, "index", f"cannot open: {exc}"))
        return
    try:
        length = os.path.getsize(path)
        if length % index.entry_size:
            problems.append(Problem(path, length, "index", "length is not a multiple of 8 bytes"))
        used = _used_slots(index, lambda e: e.offset == segment.base_offset and e.position == 0)
        previous = None
        for slot in range(used):
            entry = index.entry(slot)
            where = slot * index.entry_size
            if previous is not None and (entry.offset <= previous.offset or entry.position <= previous.position):
                problems.append(Problem(path, where, "index", f"entry {tuple(entry)} does not rise above {tuple(previous)}"))
            target = starts.get(entry.position)
            if target is None:
                problems.append(Problem(path, where, "index",
                                        f"entry for offset {entry.offset} points at byte {entry.position}, "
                                        "which is not the start of an entry"))
            elif not target.first_offset <= entry.offset <= target.last_offset:
                problems.append(Problem(path, where, "index",
                                        f"entry for offset {entry.offset} points at an entry holding offsets "
                                        f"{target.first_offset}..{target.last_offset}"))
            previous = entry
    finally:
        index.close()


def _check_time_index(segment: SegmentFile, last_offset: Optional[int], problems: list[Problem]) -> None:
    path = segment.path[: -len(".log")] + TIME_INDEX_SUFFIX
    if not os.path.exists(path):
        return
    try:
        index = TimeIndex(path, segment.base_offset, writable=False)
    except (OSError, StorageError, ValueError) as exc:
        problems.append(Problem(path, 0, "timeindex", f"cannot open: {exc}"))
        return
    try:
        length = os.path.getsize(path)
        if length % index.entry_size:
            problems.append(Problem(path, length, "timeindex", "length is not a multiple of 12 bytes"))
        used = _used_slots(index, lambda e: e.timestamp == 0 and e.offset == segment.base_offset)
        previous = None
        for slot in range(used):
            entry = index.entry(slot)
            where = slot * index.entry_size
            if previous is not None and (entry.timestamp < previous.timestamp or entry.offset < previous.offset):
                problems.append(Problem(path, where, "timeindex", f"entry {tuple(entry)} goes back from {tuple(previous)}"))
            if last_offset is not None and entry.offset > last_offset:
                problems.append(Problem(path, where, "timeindex",
                                        f"entry names offset {entry.offset}, past the segment's last offset {last_offset}"))
            previous = entry
    finally:
        index.close()


def _check_txn_index(segment: SegmentFile, problems: list[Problem]) -> None:
    path = segment.txn_index_path
    if not os.path.exists(path):
        return
    try:
        TransactionIndex(path, segment.base_offset).sanity_check()
    except StorageError as exc:
        problems.append(Problem(path, 0, "txnindex", str(exc)))


def check_segment(segment: SegmentFile) -> SegmentReport:
    problems: list[Problem] = []
    if segment.size == 0:
        starts, records = {}, 0
    else:
        with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            starts, records = _scan_log(segment, buf, problems)
    last_offset = max((e.last_offset for e in starts.values()), default=None)
    _check_offset_index(segment, starts, problems)
    _check_time_index(segment, last_offset, problems)
    _check_txn_index(segment, problems)
    return SegmentReport(segment.path, len(starts), records, problems)
