"""LogCleanerManager: which log to clean next, each partition's cleaning state, the checkpoints.

Each partition is in no state (cleanable) or in one of Kafka's LogCleaningStates:

- IN_PROGRESS: a cleaner thread works on it (or runs its retention);
- ABORTED: an abort was asked for; the thread stops at its next check and then
- PAUSED(n): no cleaning; each pause (truncation, deletion, retention of a non-compacted
  log) adds one, each resume removes one, and at zero the state goes away.

``cleaner-offset-checkpoint`` in each log dir records, per partition, the first dirty
offset: everything below it has been cleaned.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from storage.checkpoints import OffsetCheckpointFile
from storage.errors import CorruptCheckpointError, LogCleaningAbortedError
from storage.log import Log

log = logging.getLogger("storage.cleaner.LogCleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LONG_MAX = (1 << 63) - 1

TopicPartition = tuple[str, int]


class CleaningState(enum.Enum):
    IN_PROGRESS = "LogCleaningInProgress"
    ABORTED = "LogCleaningAborted"
    PAUSED = "LogCleaningPaused"


@dataclass(frozen=True)
class LogCleaningState:
    state: CleaningState
    paused_count: int = 0

    def __str__(self) -> str:
        return f"{self.state.value}({self.paused_count})" if self.state is CleaningState.PAUSED else self.state.value


IN_PROGRESS = LogCleaningState(CleaningState.IN_PROGRESS)
ABORTED = LogCleaningState(CleaningState.ABORTED)


def paused(count: int) -> LogCleaningState:
    return LogCleaningState(CleaningState.PAUSED, count)


@dataclass
class PreCleanStats:
    max_compaction_delay_ms: int = 0
    delayed_partitions: int = 0
    cleanable_partitions: int = 0

    def update_max_compaction_delay(self, delay_ms: int) -> None:
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay_ms)
        if delay_ms > 0:
            self.delayed_partitions += 1


@dataclass
class LogToClean:
    """A log with its dirty section and how dirty it is (the fields Kafka's LogToClean derives)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    need_compaction_now: bool = False
    clean_bytes: int = field(init=False)
    first_uncleanable_offset: int = field(init=False)
    cleanable_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.clean_bytes = sum(s.size for s in self.log.log_segments(-1, self.first_dirty_offset))
        self.first_uncleanable_offset, self.cleanable_bytes = calculate_cleanable_bytes(
            self.log, self.first_dirty_offset, self.uncleanable_offset)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def cleanable_offsets(tp_log: Log, last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """[first dirty, first uncleanable): never past the last stable offset, the active segment,
    or the first segment with a record younger than min.compaction.lag.ms."""
    log_start = tp_log.log_start_offset
    checkpointed = log_start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpointed < log_start:
        if not (tp_log.config.compact_enabled and tp_log.config.delete_enabled):
            log.warning("Resetting first dirty offset of %s to log start offset %d since the checkpointed offset %d "
                        "is invalid.", tp_log.topic_partition, log_start, checkpointed)
        first_dirty, force = log_start, True
    elif checkpointed > tp_log.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger than the log end "
                    "offset %d. Resetting to the log start offset %d.", tp_log.topic_partition, checkpointed,
                    tp_log.log_end_offset, log_start)
        first_dirty, force = log_start, True
    else:
        first_dirty = checkpointed
    bounds = [tp_log.last_stable_offset, tp_log.active_segment.base_offset]
    min_lag = max(tp_log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in tp_log.non_active_segments_from(first_dirty):
            if segment.largest_timestamp > now - min_lag:
                bounds.append(segment.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(bounds)), force)


def calculate_cleanable_bytes(tp_log: Log, first_dirty_offset: int, uncleanable_offset: int) -> tuple[int, int]:
    """(base offset of the segment holding the uncleanable offset, bytes of the dirty segments before it)."""
    non_active = tp_log.non_active_segments_from(uncleanable_offset)
    first_uncleanable = (non_active[0] if non_active else tp_log.active_segment).base_offset
    segments = tp_log.log_segments(min(first_dirty_offset, first_uncleanable), first_uncleanable)
    return first_uncleanable, sum(s.size for s in segments)


def max_compaction_delay(tp_log: Log, first_dirty_offset: int, now: int) -> int:
    """How far past max.compaction.lag.ms the oldest dirty segment is (0: not yet due)."""
    timestamps = [s.first_batch_timestamp_or_max() for s in tp_log.non_active_segments_from(first_dirty_offset)]
    earliest = min((t for t in timestamps if t > 0), default=LONG_MAX)
    clean_until = now - max(tp_log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


class LogCleanerManager:
    def __init__(self, log_dirs: Iterable[str], logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self._logs = logs
        self._checkpoints = {d: OffsetCheckpointFile(os.path.join(d, CLEANER_CHECKPOINT)) for d in log_dirs}
        self._states: dict[TopicPartition, LogCleaningState] = {}
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self._lock = threading.Condition(threading.RLock())

    # --- checkpoints ------------------------------------------------------------------------
    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except (CorruptCheckpointError, OSError) as exc:
            log.error("Failed to access checkpoint file %s: %s", checkpoint.path, exc)
            return {}

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            merged: dict[TopicPartition, int] = {}
            for checkpoint in self._checkpoints.values():
                merged.update(self._read_checkpoint(checkpoint))
            return merged

    def update_checkpoints(
        self, data_dir: str, update: tuple[TopicPartition, int] | None = None, remove: TopicPartition | None = None
    ) -> None:
        """Rewrite a dir's checkpoint: only live partitions, minus ``remove``, plus ``update``."""
        with self._lock:
            checkpoint = self._checkpoints.get(data_dir)
            if checkpoint is None:
                return
            live = self._logs()
            offsets = {tp: o for tp, o in self._read_checkpoint(checkpoint).items() if tp in live and tp != remove}
            if update is not None:
                offsets[update[0]] = update[1]
            checkpoint.write(offsets)

    def alter_checkpoint_dir(self, tp: TopicPartition, source_dir: str, dest_dir: str) -> None:
        """A replica moved to another log dir: its cleaner checkpoint moves with it."""
        with self._lock:
            source = self._checkpoints.get(source_dir)
            offset = None if source is None else self._read_checkpoint(source).get(tp)
            if offset is not None:
                self.update_checkpoints(source_dir, remove=tp)
                self.update_checkpoints(dest_dir, update=(tp, offset))

    def maybe_truncate_checkpoint(self, data_dir: str, tp: TopicPartition, offset: int) -> None:
        """After a truncation: the checkpoint must not point past the log's new end."""
        with self._lock:
            tp_log = self._logs().get(tp)
            checkpoint = self._checkpoints.get(data_dir)
            if tp_log is None or checkpoint is None or not tp_log.config.compact_enabled:
                return
            existing = self._read_checkpoint(checkpoint)
            if existing.get(tp, 0) > offset:
                existing[tp] = offset
                checkpoint.write(existing)

    # --- choosing work ----------------------------------------------------------------------
    def grab_filthiest_compacted_log(self, now: int, stats: PreCleanStats | None = None) -> LogToClean | None:
        """The compacted log with the highest dirty ratio above its min.cleanable.dirty.ratio (or
        overdue by max.compaction.lag.ms), marked IN_PROGRESS."""
        stats = stats or PreCleanStats()
        with self._lock:
            last_clean = self.all_cleaner_checkpoints()
            candidates = []
            for tp, tp_log in self._logs().items():
                if not tp_log.config.compact_enabled or tp in self._states or self._is_uncleanable(tp_log, tp):
                    continue
                offsets = cleanable_offsets(tp_log, last_clean.get(tp), now)
                if offsets.force_update_checkpoint:
                    self.update_checkpoints(parent_dir(tp_log), update=(tp, offsets.first_dirty_offset))
                delay = max_compaction_delay(tp_log, offsets.first_dirty_offset, now)
                stats.update_max_compaction_delay(delay)
                candidate = LogToClean(tp, tp_log, offsets.first_dirty_offset,
                                       offsets.first_uncleanable_dirty_offset, delay > 0)
                if candidate.total_bytes > 0:
                    candidates.append(candidate)
            cleanable = [
                c for c in candidates
                if (c.need_compaction_now and c.cleanable_bytes > 0)
                or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
            ]
            if not cleanable:
                return None
            stats.cleanable_partitions = len(cleanable)
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._states[filthiest.topic_partition] = IN_PROGRESS
            return filthiest

    def pause_cleaning_for_non_compacted_partitions(self) -> list[tuple[TopicPartition, Log]]:
        """For the retention thread: the non-compacted logs nobody works on, now PAUSED(1)."""
        with self._lock:
            deletable = [(tp, l) for tp, l in self._logs().items()
                         if not l.config.compact_enabled and tp not in self._states]
            for tp, _ in deletable:
                self._states[tp] = paused(1)
            return deletable

    def deletable_logs(self) -> list[tuple[TopicPartition, Log]]:
        """The compacted logs whose retention a cleaner thread runs, now IN_PROGRESS."""
        with self._lock:
            deletable = [(tp, l) for tp, l in self._logs().items()
                         if tp not in self._states and l.config.compact_enabled and not self._is_uncleanable(l, tp)]
            for tp, _ in deletable:
                self._states[tp] = IN_PROGRESS
            return deletable

    # --- pausing and aborting ---------------------------------------------------------------
    def cleaning_state(self, tp: TopicPartition) -> LogCleaningState | None:
        with self._lock:
            return self._states.get(tp)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop any cleaning of the partition (waits for it), leaving it cleanable afterwards."""
        with self._lock:
            self.abort_and_pause_cleaning(tp)
            self.resume_cleaning([tp])

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """Stop any cleaning of the partition and keep it from starting; returns once paused."""
        with self._lock:
            while self._states.get(tp) == ABORTED:  # another caller's abort: wait for its pause
                self._lock.wait(0.1)
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = paused(1)
            elif state == IN_PROGRESS:
                self._states[tp] = ABORTED
            else:
                self._states[tp] = paused(state.paused_count + 1)
            while not self._is_paused(tp):
                self._lock.wait(0.1)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        """Undo one pause of each partition."""
        with self._lock:
            for tp in tps:
                state = self._states.get(tp)
                if state is None or state.state is not CleaningState.PAUSED:
                    raise RuntimeError(f"Compaction for partition {tp} cannot be resumed since it is in {state} state.")
                if state.paused_count == 1:
                    del self._states[tp]
                else:
                    self._states[tp] = paused(state.paused_count - 1)

    def _is_paused(self, tp: TopicPartition) -> bool:
        state = self._states.get(tp)
        return state is not None and state.state is CleaningState.PAUSED

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        with self._lock:
            if self._states.get(tp) == ABORTED:
                raise LogCleaningAbortedError(f"cleaning of {tp[0]}-{tp[1]} was aborted")

    def done_cleaning(self, tp: TopicPartition, data_dir: str, end_offset: int) -> None:
        """Record the new first dirty offset, or complete an abort (PAUSED(1))."""
        with self._lock:
            if self._finish(tp):
                self.update_checkpoints(data_dir, update=(tp, end_offset))

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._finish(tp)

    def _finish(self, tp: TopicPartition) -> bool:
        """End IN_PROGRESS (True) or complete an abort into PAUSED(1) (False)."""
        state = self._states.get(tp)
        if state == IN_PROGRESS:
            del self._states[tp]
            return True
        if state == ABORTED:
            self._states[tp] = paused(1)
            self._lock.notify_all()
            return False
        raise RuntimeError(f"In-progress partition {tp} cannot be in {state} state.")

    # --- uncleanable partitions -------------------------------------------------------------
    def mark_partition_uncleanable(self, log_dir: str, tp: TopicPartition) -> None:
        with self._lock:
            self._uncleanable.setdefault(log_dir, set()).add(tp)

    def _is_uncleanable(self, tp_log: Log, tp: TopicPartition) -> bool:
        return tp in self._uncleanable.get(parent_dir(tp_log), ())

    def maintain_uncleanable_partitions(self) -> None:
        """Forget partitions that no longer exist."""
        with self._lock:
            live = self._logs()
            for log_dir in list(self._uncleanable):
                self._uncleanable[log_dir] &= live.keys()
                if not self._uncleanable[log_dir]:
                    del self._uncleanable[log_dir]


def parent_dir(tp_log: Log) -> str:
    """The log dir holding the partition (where its cleaner checkpoint lives)."""
    return os.path.dirname(os.path.abspath(tp_log.dir))
