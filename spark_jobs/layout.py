"""Finding partitions and segments under the paths a job is given (driver side).

An input path may be a broker log directory (holding ``<topic>-<partition>`` directories), one
partition directory, or a single ``.log`` segment. When the same partition turns up under
several log directories (several brokers' copies), one replica is chosen: the most complete,
i.e. the highest log end offset, then the lowest log start offset.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Optional

from protocol.exceptions import CorruptRecordError
from protocol.records.log_entry import iter_log_entries
from storage.checkpoints import OffsetCheckpointFile
from storage.log_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_file_name,
    parse_partition_dir,
)

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


class LayoutError(ValueError):
    """An input path that is not a log directory, partition directory or segment."""


@dataclass(frozen=True)
class SegmentFile:
    path: str
    base_offset: int
    size: int

    @property
    def index_path(self) -> str:
        return self.path[: -len(LOG_SUFFIX)] + INDEX_SUFFIX

    @property
    def txn_index_path(self) -> str:
        return self.path[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX


@dataclass(frozen=True)
class PartitionReplica:
    """One copy of a partition: its directory, the log dir above it, its segments in offset order."""

    topic: str
    partition: int
    directory: str
    log_dir: Optional[str]
    segments: tuple[SegmentFile, ...]

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset if self.segments else 0

    def segment_end_offsets(self) -> list[Optional[int]]:
        """Each segment's exclusive upper offset bound: the next segment's base (None for the last)."""
        return [s.base_offset for s in self.segments[1:]] + [None]


def local_path(path: str) -> str:
    """Strip a ``file:`` scheme; other filesystems are not readable by this source."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    if "://" in path:
        raise LayoutError(f"{path}: only local paths (or file:// URIs) can be read, the segments are mmapped")
    return path


def _segments_in(directory: str) -> tuple[SegmentFile, ...]:
    found = []
    for name in os.listdir(directory):
        if not name.endswith(LOG_SUFFIX):
            continue
        base = offset_from_file_name(name)
        if base is None or name != f"{name.split('.', 1)[0]}{LOG_SUFFIX}":
            continue
        path = os.path.join(directory, name)
        found.append(SegmentFile(path, base, os.path.getsize(path)))
    return tuple(sorted(found, key=lambda s: s.base_offset))


def _topic_partition_of(directory: str) -> tuple[str, int]:
    parsed = parse_partition_dir(os.path.basename(os.path.normpath(directory)))
    if parsed is None:
        raise LayoutError(
            f"{directory}: cannot tell the topic and partition, the directory must be named <topic>-<partition>"
        )
    return parsed


def _replicas_at(path: str) -> list[PartitionReplica]:
    path = os.path.abspath(local_path(path))
    if os.path.isfile(path):
        if offset_from_file_name(path) is None or not path.endswith(LOG_SUFFIX):
            raise LayoutError(f"{path}: not a log segment (expected <20-digit base offset>.log)")
        directory = os.path.dirname(path)
        topic, partition = _topic_partition_of(directory)
        segment = SegmentFile(path, offset_from_file_name(path) or 0, os.path.getsize(path))
        return [PartitionReplica(topic, partition, directory, None, (segment,))]
    if not os.path.isdir(path):
        raise LayoutError(f"{path}: no such file or directory")
    segments = _segments_in(path)
    children = [
        (parsed, os.path.join(path, name))
        for name in sorted(os.listdir(path))
        if (parsed := parse_partition_dir(name)) is not None and os.path.isdir(os.path.join(path, name))
    ]
    # A log dir may itself be named like a partition ("kafka-logs-1"): its partition children decide.
    if segments or (not children and parse_partition_dir(os.path.basename(path)) is not None):
        topic, partition = _topic_partition_of(path)
        return [PartitionReplica(topic, partition, path, os.path.dirname(path), segments)]
    return [PartitionReplica(t, p, child, path, _segments_in(child)) for (t, p), child in children]


def log_end_offset(replica: PartitionReplica) -> int:
    """The offset after the last complete entry, found by stepping through the last non-empty segment."""
    for segment in reversed(replica.segments):
        if segment.size == 0:
            continue
        with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            next_offset = None
            try:
                for _pos, header in iter_log_entries(buf):
                    next_offset = header.next_offset
            except CorruptRecordError:
                pass  # the offset reached before the corruption is the usable end; `verify` reports it
            if next_offset is not None:
                return next_offset
    return replica.log_start_offset


def discover(paths: Iterable[str], wants_topic: Optional[Callable[[str], bool]] = None) -> list[PartitionReplica]:
    """One replica per (topic, partition) found under ``paths``, sorted by topic and partition."""
    by_partition: dict[tuple[str, int], list[PartitionReplica]] = {}
    for path in paths:
        for replica in _replicas_at(path):
            if wants_topic is None or wants_topic(replica.topic):
                by_partition.setdefault((replica.topic, replica.partition), []).append(replica)
    chosen = []
    for key in sorted(by_partition):
        candidates = by_partition[key]
        if len(candidates) == 1:
            chosen.append(candidates[0])
        else:
            chosen.append(max(candidates, key=lambda r: (log_end_offset(r), -r.log_start_offset)))
    return chosen


def high_watermark(replica: PartitionReplica) -> int:
    """The partition's high watermark from its log dir's replication-offset-checkpoint."""
    if replica.log_dir is None:
        raise LayoutError(
            f"{replica.directory}: committed-only needs the broker log dir (its replication-offset-checkpoint), "
            "not a single segment"
        )
    checkpoint_path = os.path.join(replica.log_dir, REPLICATION_OFFSET_CHECKPOINT)
    offsets = OffsetCheckpointFile(checkpoint_path, create=False).read()
    try:
        return offsets[(replica.topic, replica.partition)]
    except KeyError:
        raise LayoutError(
            f"{checkpoint_path} has no high watermark for {replica.topic}-{replica.partition}"
        ) from None
