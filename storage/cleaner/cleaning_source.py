"""What one cleaning round needs from its log, in a form a cleaner process can be handed.

The Cleaner never touches the Log itself: it asks a ``CleaningSource`` for the segments of an
offset range (as ``SegmentToClean``: the .log bytes as they were, on a descriptor that survives
the segment's renames, and the facts it needs from the indexes), the aborted transactions of a
range, the live producers' last records, and finally to swap a cleaned segment in.
``LocalCleaningSource`` answers from the Log in this process; the cleaner process
(``cleaner_process``) asks the broker's ``LocalCleaningSource`` for the same over a pipe.
"""

from __future__ import annotations

import os
from typing import Protocol

from storage.errors import LogCleaningAbortedError
from storage.file_records import FileRecords
from storage.log import LastRecord, Log
from storage.log_config import LogConfig
from storage.log_files import CLEANED_SUFFIX, SEGMENT_SUFFIXES, segment_path
from storage.log_segment import LogSegment
from storage.transaction_index import AbortedTxn


class SegmentToClean:
    """One source segment of a cleaning round; ``log`` is a read-only view of its bytes."""

    __slots__ = ("base_offset", "log", "offset_index_bytes", "time_index_bytes", "next_offset",
                 "last_modified_ms", "start_position")

    def __init__(self, base_offset: int, log: FileRecords, offset_index_bytes: int, time_index_bytes: int,
                 next_offset: int, last_modified_ms: int, start_position: int) -> None:
        self.base_offset = base_offset
        self.log = log
        self.offset_index_bytes = offset_index_bytes
        self.time_index_bytes = time_index_bytes
        self.next_offset = next_offset  # after its last batch (its base offset when empty)
        self.last_modified_ms = last_modified_ms
        self.start_position = start_position  # where the range asked for starts in it (0 at or below its base)

    @classmethod
    def of(cls, segment: LogSegment, start_offset: int) -> SegmentToClean:
        return cls(segment.base_offset, segment.log.slice(0, segment.size), segment.offset_index.size_in_bytes,
                   segment.time_index.size_in_bytes, segment.read_next_offset(), segment.last_modified_ms,
                   segment.offset_index.lookup(start_offset).position if start_offset > segment.base_offset else 0)

    @property
    def size(self) -> int:
        return len(self.log)

    def facts(self) -> tuple[int, str, int, int, int, int, int, int]:
        """Everything but the descriptor, to send along with it."""
        return (self.base_offset, self.log.path, self.size, self.offset_index_bytes, self.time_index_bytes,
                self.next_offset, self.last_modified_ms, self.start_position)

    @classmethod
    def from_facts(cls, facts: tuple[int, str, int, int, int, int, int, int], fd: int) -> SegmentToClean:
        base, path, size, index_bytes, time_bytes, next_offset, modified, start = facts
        return cls(base, FileRecords(path, fd, 0, size, True), index_bytes, time_bytes, next_offset, modified, start)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path!r})"


class CleaningSource(Protocol):
    topic_partition: str
    dir: str
    config: LogConfig

    def segments(self, start_offset: int, end_offset: int) -> list[SegmentToClean]:
        """The segments that may hold offsets in [start_offset, end_offset) (Kafka's logSegments)."""

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]: ...

    def active_producers(self) -> dict[int, LastRecord]: ...

    def swap(self, cleaned: LogSegment, base_offsets: list[int]) -> None:
        """Put the finished ``cleaned`` segment in place of the segments of these base offsets (as
        ``segments`` gave them); on LogCleaningAbortedError (the log changed meanwhile) the
        cleaned segment is gone."""


class LocalCleaningSource:
    """A CleaningSource on a Log of this process (the truncation count taken when the round starts)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.topic_partition = log.topic_partition
        self.dir = log.dir
        self.config = log.config
        self._truncations = log.truncation_count
        self._segments: dict[int, LogSegment] = {}  # what segments() gave, for the swap

    def segments(self, start_offset: int, end_offset: int) -> list[SegmentToClean]:
        found = self.log.log_segments(start_offset, end_offset)
        self._segments.update((segment.base_offset, segment) for segment in found)
        return [SegmentToClean.of(segment, start_offset) for segment in found]

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.log.collect_aborted_transactions(start_offset, upper_bound_offset)

    def active_producers(self) -> dict[int, LastRecord]:
        return self.log.last_records_of_active_producers()

    def swap(self, cleaned: LogSegment, base_offsets: list[int]) -> None:
        try:
            self.log.replace_segments([cleaned], [self._segments[base] for base in base_offsets], self._truncations)
        except LogCleaningAbortedError:
            discard(cleaned)
            raise


def new_cleaned_segment(directory: str, base_offset: int, config: LogConfig) -> LogSegment:
    """Kafka's createNewCleanedSegment: any leftover ``.cleaned`` files of that base go first."""
    for suffix in SEGMENT_SUFFIXES:
        try:
            os.remove(segment_path(directory, base_offset, suffix, CLEANED_SUFFIX))
        except FileNotFoundError:
            pass
    return LogSegment.open(directory, base_offset, config, file_suffix=CLEANED_SUFFIX)


def discard(segment: LogSegment) -> None:
    segment.close()
    segment.delete_files()
