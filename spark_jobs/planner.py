"""Driver-side planning: which byte ranges of which segments each Spark task reads.

Every segment is at least one split. A segment larger than ``maxSplitBytes`` is cut at entry
starts taken from its ``.index`` (each index entry's position is where an entry begins), so a
1 GiB segment is read by several tasks; a segment without a usable index is cut at positions
found by stepping through its entry headers. Offset bounds (startingOffsets, the high watermark
for committedOnly, the last stable offset for read_committed) drop whole segments up front and
are applied per entry in the executors.
"""

from __future__ import annotations

import bisect
import mmap
import os
from dataclasses import dataclass, field
from typing import Optional

from pyspark.sql.datasource import InputPartition

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import iter_batch_positions
from protocol.records.log_entry import iter_log_entries, read_log_entry
from spark_jobs.layout import PartitionReplica, SegmentFile, discover, high_watermark, log_end_offset
from spark_jobs.read_options import READ_COMMITTED, ReadOptions
from storage.errors import StorageError
from storage.offset_index import OffsetIndex, OffsetPosition
from storage.transaction_index import TransactionIndex

AbortedRange = tuple[int, int, int]  # producer id, first offset, marker (last) offset


@dataclass
class SegmentSplit(InputPartition):
    """One task's work: ``[start, end)`` bytes of one segment, and the offset window to return."""

    topic: str
    partition: int
    path: str
    segment_base_offset: int
    start: int
    end: int
    min_offset: Optional[int] = None
    max_offset: Optional[int] = None  # exclusive
    is_last_segment: bool = False
    aborted: tuple[AbortedRange, ...] = field(default=())

    def __post_init__(self) -> None:
        self.value = f"{self.path}[{self.start}:{self.end}]"


def usable_index_entries(segment: SegmentFile) -> list[OffsetPosition]:
    """The .index entries up to the first that cannot be real (a preallocated index is zero-padded)."""
    if not os.path.exists(segment.index_path) or os.path.getsize(segment.index_path) == 0:
        return []
    try:
        index = OffsetIndex(segment.index_path, segment.base_offset, writable=False)
    except (OSError, StorageError):
        return []
    try:
        entries: list[OffsetPosition] = []
        for slot in range(index.entries):
            entry = index.entry(slot)
            previous = entries[-1] if entries else OffsetPosition(segment.base_offset - 1, 0)
            if (entries and entry.position <= previous.position) or entry.offset <= previous.offset:
                break
            if entry.position >= segment.size:
                break
            entries.append(entry)
        return entries
    finally:
        index.close()


def _entry_starts(buf: mmap.mmap, entries: list[OffsetPosition]) -> list[OffsetPosition]:
    """Index entries that really point at the start of a log entry holding their offset."""
    valid = []
    for entry in entries:
        try:
            header = read_log_entry(buf, entry.position)
        except CorruptRecordError:
            continue
        if header.last_offset >= entry.offset:
            valid.append(entry)
    return valid


def _scanned_starts(buf: mmap.mmap, step: int) -> list[OffsetPosition]:
    """Entry starts about ``step`` bytes apart, found from the size fields alone (no index)."""
    starts: list[OffsetPosition] = []
    next_cut = step
    try:
        for pos, _size in iter_batch_positions(buf):
            if pos >= next_cut:
                starts.append(OffsetPosition(-1, pos))
                next_cut = pos + step
    except CorruptRecordError:
        pass  # the reader reports the corruption with its position
    return starts


def _segment_ranges(segment: SegmentFile, min_offset: Optional[int], max_split_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges covering the segment from the entry holding ``min_offset`` to the end."""
    if segment.size == 0:
        return []
    needs_index = segment.size > max_split_bytes or (min_offset is not None and min_offset > segment.base_offset)
    if not needs_index:
        return [(0, segment.size)]
    with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        starts = _entry_starts(buf, usable_index_entries(segment))
        if not starts and segment.size > max_split_bytes:
            starts = _scanned_starts(buf, max_split_bytes)
    start = 0
    if min_offset is not None and starts and starts[0].offset >= 0:
        slot = bisect.bisect_right([s.offset for s in starts], min_offset) - 1
        if slot >= 0:
            start = starts[slot].position
    positions = [s.position for s in starts if s.position > start]
    ranges = []
    while True:
        limit = start + max_split_bytes
        cut = bisect.bisect_right(positions, limit) - 1
        if cut < 0 or positions[cut] <= start:
            later = bisect.bisect_right(positions, start)
            cut = later if later < len(positions) else -1
        if cut < 0 or segment.size <= limit:
            ranges.append((start, segment.size))
            return ranges
        ranges.append((start, positions[cut]))
        start = positions[cut]


def _aborted_ranges(replica: PartitionReplica) -> list[AbortedRange]:
    ranges = []
    for segment in replica.segments:
        if os.path.exists(segment.txn_index_path):
            for txn in TransactionIndex(segment.txn_index_path, segment.base_offset).all_aborted_txns():
                ranges.append((txn.producer_id, txn.first_offset, txn.last_offset))
    return ranges


def last_stable_offset(replica: PartitionReplica) -> int:
    """First offset of the earliest transaction still open at the end of the log, else the log end."""
    open_txns: dict[int, int] = {}
    end = replica.log_start_offset
    for segment in replica.segments:
        if segment.size == 0:
            continue
        with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                for _pos, header in iter_log_entries(buf):
                    end = header.next_offset
                    if not header.is_transactional:
                        continue
                    if header.is_control:
                        open_txns.pop(header.producer_id, None)
                    else:
                        open_txns.setdefault(header.producer_id, header.base_offset)
            except CorruptRecordError:
                break  # nothing past a corrupt entry is readable as committed
    return min(open_txns.values(), default=end)


def _partition_upper_bound(replica: PartitionReplica, options: ReadOptions, requested: Optional[int]) -> Optional[int]:
    bounds = [] if requested is None else [requested]
    if options.committed_only:
        bounds.append(high_watermark(replica))
    if options.isolation_level == READ_COMMITTED:
        bounds.append(last_stable_offset(replica))
    return min(bounds) if bounds else None


def plan_partition(replica: PartitionReplica, options: ReadOptions,
                   bounds: Optional[tuple[int, int]] = None) -> list[SegmentSplit]:
    """The splits of one partition; ``bounds`` (first offset, exclusive end) are final when given,
    as a stream's micro-batch range is, else they come from the options and the log."""
    if bounds is None:
        min_offset, requested_max = options.offset_bounds(replica.topic, replica.partition)
        max_offset = _partition_upper_bound(replica, options, requested_max)
    else:
        min_offset, max_offset = bounds
    aborted = _aborted_ranges(replica) if options.isolation_level == READ_COMMITTED else []
    splits = []
    segment_ends = replica.segment_end_offsets()
    for number, (segment, segment_end) in enumerate(zip(replica.segments, segment_ends)):
        if min_offset is not None and segment_end is not None and segment_end <= min_offset:
            continue
        if max_offset is not None and segment.base_offset >= max_offset:
            break
        relevant = tuple(
            r for r in aborted if r[2] >= segment.base_offset and (segment_end is None or r[1] < segment_end)
        )
        for start, end in _segment_ranges(segment, min_offset, options.max_split_bytes):
            splits.append(
                SegmentSplit(
                    replica.topic, replica.partition, segment.path, segment.base_offset, start, end,
                    min_offset, max_offset, number == len(replica.segments) - 1, relevant,
                )
            )
    return splits


def plan(options: ReadOptions) -> list[SegmentSplit]:
    return [split for replica in discover(options.paths, options.wants_topic) for split in plan_partition(replica, options)]


def partition_end_offsets(options: ReadOptions) -> dict[tuple[str, int], int]:
    """Log end offset of every partition under the paths (for lag)."""
    return {(r.topic, r.partition): log_end_offset(r) for r in discover(options.paths, options.wants_topic)}
