"""LeaderEpochFileCache: epoch -> first offset written in that epoch, persisted in leader-epoch-checkpoint.

Used by OffsetsForLeaderEpoch and by follower truncation; rules follow Kafka's cache:
entries strictly increase in both epoch and start offset.
"""

from __future__ import annotations

import bisect
import logging
import threading
from typing import NamedTuple

from storage.checkpoints import LeaderEpochCheckpointFile
from storage.errors import CorruptCheckpointError

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, checkpoint: LeaderEpochCheckpointFile) -> None:
        self.checkpoint = checkpoint
        self._lock = threading.RLock()
        self.was_corrupt = False  # the loader then rebuilds the cache from batch headers
        try:
            loaded = [EpochEntry(e, o) for e, o in checkpoint.read()]
        except CorruptCheckpointError as exc:
            log.warning("ignoring corrupt leader-epoch checkpoint, the cache is rebuilt from the log: %s", exc)
            loaded = []
            self.was_corrupt = True
        self._entries: list[EpochEntry] = []
        try:
            for entry in loaded:
                self._assign(entry)
        except ValueError as exc:
            log.warning("ignoring invalid leader-epoch checkpoint %s: %s", checkpoint.path, exc)
            self._entries = []
            self.was_corrupt = True

    # --- queries --------------------------------------------------------------------------
    def epoch_entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    def is_before_latest(self, epoch: int) -> bool:
        """Whether ``epoch`` is older than the latest one recorded (read on every leader append)."""
        entries = self._entries
        return bool(entries) and epoch < entries[-1].epoch

    def latest_epoch(self) -> int | None:
        entry = self.latest_entry()
        return entry.epoch if entry else None

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset``."""
        with self._lock:
            result = None
            for entry in self._entries:
                if entry.start_offset > offset:
                    break
                result = entry.epoch
            return result

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, as Kafka's endOffsetFor decides it."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries and self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            epochs = [e.epoch for e in self._entries]
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            higher_start = self._entries[higher].start_offset
            if higher == 0:
                return requested_epoch, higher_start
            return self._entries[higher - 1].epoch, higher_start

    # --- updates ----------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        entries = self._entries
        if entries and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset:
            return  # the common case on every append: same epoch, nothing to do
        with self._lock:
            if self._assign(EpochEntry(epoch, start_offset)):
                self.flush()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (follower truncation)."""
        with self._lock:
            if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries = [e for e in self._entries if e.start_offset < end_offset]
                self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries below a new log start offset, keeping the epoch that covers it."""
        with self._lock:
            removed = [e for e in self._entries if e.start_offset <= start_offset]
            if not removed:
                return
            kept = [e for e in self._entries if e.start_offset > start_offset]
            entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
            if entries != self._entries:  # a log loaded at its start offset: nothing to rewrite and fsync
                self._entries = entries
                self.flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._entries = []
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self.checkpoint.write(self._entries)
