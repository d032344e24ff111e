"""What the streaming source learns from the log dirs on the driver: each partition's extent.

A partition's readable end is its high watermark as the broker last checkpointed it in its log
dir's ``replication-offset-checkpoint`` (and, under read_committed, no further than the last
stable offset). The log end and the open transactions are found by stepping through entry
headers; a TailScanner remembers where it stopped per partition, so each trigger only reads
what was appended since. The log start is the first segment's base offset, or the log dir's
``log-start-offset-checkpoint`` when DeleteRecords moved it further.
"""

from __future__ import annotations

import bisect
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Optional

from protocol.exceptions import CorruptRecordError
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from spark_jobs.layout import REPLICATION_OFFSET_CHECKPOINT, LayoutError, PartitionReplica, discover, local_path
from spark_jobs.planner import usable_index_entries
from spark_jobs.stream_offsets import PartitionExtent, TopicPartition
from storage.checkpoints import OffsetCheckpointFile

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
META_PROPERTIES = "meta.properties"


def require_broker_log_dirs(paths: Iterable[str]) -> None:
    """The stream reads whole broker log dirs: the high watermark lives in their checkpoint file."""
    for path in paths:
        local = local_path(path)
        if not os.path.isdir(local):
            raise LayoutError(f"{local}: no such log directory")
        if not any(os.path.exists(os.path.join(local, name))
                   for name in (META_PROPERTIES, REPLICATION_OFFSET_CHECKPOINT)):
            raise LayoutError(
                f"{local}: not a Kafka broker log dir (no {META_PROPERTIES} or {REPLICATION_OFFSET_CHECKPOINT}); "
                "a streaming read needs the broker's log dirs, not partition directories or segments"
            )


def read_checkpoint(log_dir: Optional[str], name: str) -> dict[TopicPartition, int]:
    if log_dir is None:
        return {}
    path = os.path.join(log_dir, name)
    if not os.path.exists(path):
        return {}  # a broker writes its first checkpoint some seconds after it starts
    return OffsetCheckpointFile(path, create=False).read()


def log_start(replica: PartitionReplica, deleted_below: Optional[int] = None) -> int:
    return max(replica.log_start_offset, deleted_below or 0)


@dataclass
class _Tail:
    """How far one partition's entries were stepped through, and the transactions open there."""

    segment_base: int
    position: int
    next_offset: int
    open_txns: dict[int, int] = field(default_factory=dict)  # producer id -> first offset


class TailScanner:
    """Per partition, the log end and (read_committed) the last stable offset, found incrementally."""

    def __init__(self, track_transactions: bool) -> None:
        self.track_transactions = track_transactions
        self._tails: dict[TopicPartition, _Tail] = {}

    def _start(self, replica: PartitionReplica) -> _Tail:
        tail = self._tails.get((replica.topic, replica.partition))
        bases = [s.base_offset for s in replica.segments]
        if tail is not None and tail.segment_base in bases:
            segment = replica.segments[bases.index(tail.segment_base)]
            if segment.size >= tail.position:
                return tail
        # First look, or the segment scanned last is gone (deleted, compacted away, log replaced).
        if not replica.segments:
            return _Tail(0, 0, replica.log_start_offset)
        first = replica.segments[0] if self.track_transactions else replica.segments[-1]
        return _Tail(first.base_offset, 0, first.base_offset)

    def scan(self, replica: PartitionReplica) -> _Tail:
        tail = self._start(replica)
        for segment in replica.segments:
            if segment.base_offset < tail.segment_base or segment.size == 0:
                continue
            if segment.base_offset > tail.segment_base:
                tail.segment_base, tail.position = segment.base_offset, 0
                tail.next_offset = max(tail.next_offset, segment.base_offset)
            with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                try:
                    for pos, header in iter_log_entries(buf, tail.position):
                        tail.position, tail.next_offset = pos + header.size, header.next_offset
                        if self.track_transactions and header.is_transactional:
                            if header.is_control:
                                tail.open_txns.pop(header.producer_id, None)
                            else:
                                tail.open_txns.setdefault(header.producer_id, header.base_offset)
                except CorruptRecordError:
                    break  # an entry still being written, or damage the reader will name if it gets there
        self._tails[(replica.topic, replica.partition)] = tail
        return tail


@dataclass(frozen=True)
class LogSnapshot:
    """The partitions under the log dirs at one moment, and what each holds."""

    replicas: dict[TopicPartition, PartitionReplica]
    extents: dict[TopicPartition, PartitionExtent]


def snapshot(paths: Iterable[str], wants_topic, scanner: TailScanner, read_committed: bool) -> LogSnapshot:
    replicas = {(r.topic, r.partition): r for r in discover(paths, wants_topic)}
    checkpoints: dict[Optional[str], tuple[dict[TopicPartition, int], dict[TopicPartition, int]]] = {}
    extents = {}
    for tp, replica in replicas.items():
        if replica.log_dir not in checkpoints:
            checkpoints[replica.log_dir] = (read_checkpoint(replica.log_dir, REPLICATION_OFFSET_CHECKPOINT),
                                            read_checkpoint(replica.log_dir, LOG_START_OFFSET_CHECKPOINT))
        high_watermarks, log_starts = checkpoints[replica.log_dir]
        start = log_start(replica, log_starts.get(tp))
        tail = scanner.scan(replica)
        end = max(tail.next_offset, start)
        readable = min(max(high_watermarks.get(tp, start), start), end)
        if read_committed and tail.open_txns:
            readable = min(readable, min(tail.open_txns.values()))
        extents[tp] = PartitionExtent(start, max(readable, start), end)
    return LogSnapshot(replicas, extents)


def byte_position(replica: PartitionReplica, offset: int) -> int:
    """Roughly where ``offset`` sits in the partition's bytes (to the .index's granularity)."""
    total = 0
    ends = replica.segment_end_offsets()
    for segment, end in zip(replica.segments, ends):
        if end is not None and end <= offset:
            total += segment.size
            continue
        entries = usable_index_entries(segment)
        slot = bisect.bisect_right([e.offset for e in entries], offset) - 1
        return total + (entries[slot].position if slot >= 0 else 0)
    return total


def offset_for_timestamp(replica: PartitionReplica, timestamp: int, below: int) -> Optional[int]:
    """The first offset below ``below`` whose record timestamp is at or after ``timestamp`` (as
    ListOffsets answers it), from the entries' max timestamps, decoding only the entry that holds it."""
    for segment in replica.segments:
        if segment.size == 0 or segment.base_offset >= below:
            continue
        with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            for pos, header in iter_log_entries(buf):
                if header.base_offset >= below:
                    return None
                if header.is_control or header.max_timestamp < timestamp:
                    continue
                for record in decode_entry_records(buf, pos):
                    if record.timestamp >= timestamp and record.offset < below:
                        return record.offset
    return None
