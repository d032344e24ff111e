"""Log: one partition's log (Kafka's UnifiedLog role).

Appends take whole batches: the leader assigns offsets, the leader epoch and (under
LogAppendTime) the timestamp in place, producer state is validated before anything is
written, and the buffer goes to the active segment with one write. Reads return zero-copy
FileRecords slices of whole batches bounded by the log end, high watermark or last stable
offset. All public methods are synchronous and thread-safe (one lock per log).
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import Buffer
from protocol.records.log_entry import decode_entry_records
from storage.checkpoints import LeaderEpochCheckpointFile, fsync_dir
from storage.errors import (
    CorruptRecordStorageError,
    InvalidRecordError,
    LogCleaningAbortedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StaleLeaderEpochError,
)
from storage.file_records import FileRecords
from storage.leader_epoch_cache import LeaderEpochFileCache
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import LogDirFailureChannel, reports_io_errors, storage_error
from storage.log_files import CLEANED_SUFFIX, DELETED_SUFFIX, LEADER_EPOCH_CHECKPOINT, SWAP_SUFFIX
from storage.log_loader import LogLoader, rebuild_producer_state
from storage.log_segment import LogSegment, now_ms
from storage.log_segments import LogSegments
from storage.log_validator import (
    Batches,
    LogAppendInfo,
    analyze_and_validate_records,
    analyze_producer_state,
    assign_offsets_and_epoch,
    check_follower_offsets,
)
from storage.producer_state import (
    SENTINEL_GUARD,
    AppendOrigin,
    CompletedTxn,
    ProducerStateManager,
    ProducerStateEntry,
    ProducerStateManagerConfig,
    VerificationGuard,
)
from storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
NO_TIMESTAMP = -1
FOREVER = 1 << 62  # a "now" past every pending deletion


class FetchIsolation(enum.Enum):
    LOG_END = "log_end"  # replicas
    HIGH_WATERMARK = "high_watermark"  # read_uncommitted consumers
    TXN_COMMITTED = "txn_committed"  # read_committed consumers: up to the last stable offset


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(slots=True)
class FetchDataInfo:
    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecords
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None


class LastRecord(NamedTuple):
    """An active producer's last data offset (None after only a marker) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


F = TypeVar("F", bound=Callable[..., Any])


class LogMovedError(Exception):
    """Raised under a log's lock once its future log replaced it (AlterReplicaLogDirs)."""


def follows_move(method: F) -> F:
    """A call on a log that its future log replaced runs on the replacement instead: whoever took
    the log before the swap never appends to, truncates or reads the retired copy."""
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: Log, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except LogMovedError:
            return getattr(self.moved_to, name)(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


class Log:
    def __init__(
        self,
        directory: str,
        config: LogConfig,
        *,
        topic_partition: str | None = None,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
        producer_state_config: ProducerStateManagerConfig | None = None,
        now: int | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.failure_channel = failure_channel
        self.topic_partition = topic_partition or os.path.basename(os.path.normpath(directory))
        self.config = config
        self._lock = threading.RLock()
        self.segments = LogSegments()
        self.producers = ProducerStateManager(directory, self.topic_partition, producer_state_config)
        self.leader_epoch_cache = LeaderEpochFileCache(
            LeaderEpochCheckpointFile(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        )
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        # Truncations below the active segment run inside this guard (the LogManager pauses the
        # log's cleaning there, as Kafka's LogManager.truncateTo does); the count lets a
        # cleaning that raced one notice it before swapping its segments in.
        self.truncation_guard: Callable[[], AbstractContextManager[object]] = nullcontext
        self.truncation_count = 0
        # The future log that replaced this one in another log dir (set under the lock by the swap).
        self.moved_to: Log | None = None
        # The topic id its partition.metadata holds, once the LogManager has written or checked it
        # (Kafka's UnifiedLog._topicId): later LeaderAndIsr requests compare without reading the file.
        self.topic_id: uuid.UUID | None = None
        current = now_ms() if now is None else now
        loaded = LogLoader(
            directory, config, self.segments, self.producers, self.leader_epoch_cache,
            log_start_offset=log_start_offset, recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown, now_ms=current,
        ).load()
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self._next_offset = loaded.next_offset
        self.last_flush_ms = current
        self._high_watermark = loaded.log_start_offset
        self.update_high_watermark(high_watermark)

    def __repr__(self) -> str:
        return f"Log({self.topic_partition}, start={self._log_start_offset}, end={self._next_offset})"

    # --- offsets --------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below are flushed; a segment that failed a read check pulls it back for recovery."""
        with self._lock:
            point = self._recovery_point
            for segment in self.segments:
                if segment.corrupt_position is not None:
                    point = min(point, segment.base_offset)
            return point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of an undecided transaction (or one whose marker is not yet below the
        high watermark), never below the log start; the high watermark when there is none."""
        with self._lock:
            first_unstable = self.producers.first_unstable_offset()
            hw = self._high_watermark
            return hw if first_unstable is None else min(max(first_unstable, self._log_start_offset), hw)

    @property
    def first_unstable_offset(self) -> int | None:
        with self._lock:
            return self.producers.first_unstable_offset()

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    @property
    def size(self) -> int:
        with self._lock:
            return self.segments.size_in_bytes()

    def exclusive(self) -> AbstractContextManager[bool]:
        """The log's own lock: while it is held no other thread appends to, truncates or reads it
        (a log dir move copies the last batches and swaps logs under it)."""
        return self._lock

    def _check_not_moved(self) -> None:
        """Call under the lock: a retired log refuses, and ``follows_move`` re-runs the call."""
        if self.moved_to is not None:
            raise LogMovedError(self.topic_partition)

    @follows_move
    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns the value set."""
        with self._lock:
            self._check_not_moved()
            return self._set_high_watermark(offset)

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        # After every produce append: ``follows_move`` spelled out, two call frames fewer.
        with self._lock:
            moved_to = self.moved_to
            if moved_to is None:
                if offset <= self._high_watermark:
                    return False
                self._set_high_watermark(offset)
                return True
        return moved_to.maybe_increment_high_watermark(offset)  # outside this lock, as follows_move

    def _set_high_watermark(self, offset: int) -> int:
        hw = min(max(offset, self._log_start_offset), self._next_offset)
        self._high_watermark = hw
        self.producers.on_high_watermark_updated(hw)
        return hw

    # --- appends --------------------------------------------------------------------------
    def append_as_leader(
        self, records: bytearray | memoryview, leader_epoch: int, origin: AppendOrigin = AppendOrigin.CLIENT,
        now: int | None = None, *, validated: bool = False, parsed: Batches | None = None,
        verification_guard: VerificationGuard = SENTINEL_GUARD,
    ) -> LogAppendInfo:
        """Validate, assign offsets in place (``records`` must be writable) and append.

        ``validated=True`` skips the CRC check, for callers that already checked every batch's
        CRC on the produce path (each batch must be CRC-checked exactly once before it is
        written); framing and all other checks still run. ``parsed``: the batches such a caller
        parsed doing so (framing checked), not parsed again. ``verification_guard`` is the one
        ``maybe_start_transaction_verification`` gave for this append's transactional batch.
        """
        info = self._leader_append(records, leader_epoch, origin, now, validated, parsed, verification_guard, True)
        assert info is not None
        return info

    def try_append_as_leader(
        self, records: bytearray | memoryview, leader_epoch: int, origin: AppendOrigin = AppendOrigin.CLIENT,
        *, validated: bool = False, parsed: Batches | None = None,
        verification_guard: VerificationGuard = SENTINEL_GUARD,
    ) -> LogAppendInfo | None:
        """``append_as_leader`` for the event loop: only an append that is a plain page-cache write
        happens (the lock is free, no segment roll, which fsyncs, no ``flush.messages`` fsync due);
        otherwise None, nothing changed, and the caller appends from a thread that may block."""
        return self._leader_append(records, leader_epoch, origin, None, validated, parsed, verification_guard, False)

    def _leader_append(
        self, records: bytearray | memoryview, leader_epoch: int, origin: AppendOrigin, now: int | None,
        validated: bool, parsed: Batches | None, verification_guard: VerificationGuard, blocking: bool,
    ) -> LogAppendInfo | None:
        # The produce hot path: ``follows_move`` and ``reports_io_errors`` spelled out, two call frames fewer.
        try:
            return self._append(records, origin, leader_epoch, True, now, not validated, verification_guard, blocking,
                                parsed)
        except LogMovedError:
            assert self.moved_to is not None
            return self.moved_to._leader_append(records, leader_epoch, origin, now, validated, parsed,
                                                verification_guard, blocking)
        except OSError as exc:
            raise storage_error(self, "append_as_leader", exc) from exc

    @follows_move
    @reports_io_errors
    def append_as_follower(self, records: Buffer, now: int | None = None) -> LogAppendInfo:
        """Append batches fetched from the leader as they are (offsets already assigned)."""
        info = self._append(records, AppendOrigin.REPLICATION, -1, False, now, True, SENTINEL_GUARD, True)
        assert info is not None
        return info

    @follows_move
    @reports_io_errors
    def try_append_as_follower(self, records: Buffer) -> LogAppendInfo | None:
        """``append_as_follower`` for the event loop, as ``try_append_as_leader``."""
        return self._append(records, AppendOrigin.REPLICATION, -1, False, None, True, SENTINEL_GUARD, False)

    def _append(
        self, records: Buffer, origin: AppendOrigin, leader_epoch: int, assign_offsets: bool, now: int | None,
        check_crc: bool, verification_guard: VerificationGuard, blocking: bool, parsed: Batches | None = None,
    ) -> LogAppendInfo | None:
        """The append; with ``blocking=False`` None instead of waiting for the lock, rolling or fsyncing.
        The hot path: everything below is per batch (most appends carry one) or per append."""
        config = self.config
        size = len(records)
        batches, num_records, max_ts, max_ts_batch, has_producer_ids = analyze_and_validate_records(
            records, self.topic_partition, config.max_message_bytes, origin, assign_offsets, check_crc, parsed
        )
        if size > config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"message batch size is {size} bytes in append to {self.topic_partition}, "
                f"which exceeds the maximum configured segment size of {config.segment_bytes}"
            )
        lock = self._lock
        if not lock.acquire(blocking):
            return None
        try:
            if self.moved_to is not None:  # _check_not_moved, inlined
                raise LogMovedError(self.topic_partition)
            if not batches:
                return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self._log_start_offset, 0, 0, 0)
            if assign_offsets and leader_epoch >= 0 and self.leader_epoch_cache.is_before_latest(leader_epoch):
                raise StaleLeaderEpochError(f"append to {self.topic_partition} at leader epoch {leader_epoch}, "
                                            f"after epoch {self.leader_epoch_cache.latest_epoch()} started")
            append_time = NO_TIMESTAMP
            if assign_offsets:
                first_offset = self._next_offset
                if config.log_append_time:
                    append_time = now = now_ms() if now is None else now
                    max_ts, max_ts_batch = append_time, 0  # every batch gets it: the first one has it first
                next_offset = first_offset
                for _, header in batches:
                    next_offset += header.last_offset_delta + 1  # type: ignore[union-attr]
            else:
                first = batches[0][1]
                first_offset = first.base_offset if first.magic >= 2 else first.last_offset
                next_offset = check_follower_offsets(batches, self._next_offset, self.topic_partition)
            last_offset = next_offset - 1
            segment = self.segments.active
            roll = segment.should_roll(config.segment_bytes, config.segment_ms, size, max_ts, last_offset, now)
            flush = next_offset - self._recovery_point >= config.flush_messages
            if not blocking and (roll or flush):
                return None  # nothing changed yet: the caller appends again where it may block
            if assign_offsets:
                assign_offsets_and_epoch(records, batches, first_offset, leader_epoch, append_time)
            max_ts_offset = batches[max_ts_batch][1].last_offset if max_ts_batch >= 0 else -1
            producers = self.producers
            completed: list[CompletedTxn] = []
            if has_producer_ids:  # batches without a producer id leave producer state alone
                updated, completed, duplicate = analyze_producer_state(producers, records, batches, origin,
                                                                    verification_guard)
                if duplicate is not None:
                    return LogAppendInfo(
                        duplicate.first_offset, duplicate.last_offset, max_ts, max_ts_offset, duplicate.timestamp,
                        self._log_start_offset, size, len(batches), num_records, duplicate=True,
                    )
            if roll:  # its fsync of the old segment moves the recovery point
                segment = self._roll_for_append(segment, first_offset)
                flush = next_offset - self._recovery_point >= config.flush_messages
            segment.append(last_offset, max_ts, records, batches)
            self._next_offset = next_offset
            if assign_offsets:  # one epoch for every batch: only the first can start it
                if leader_epoch >= 0:
                    self.leader_epoch_cache.assign(leader_epoch, first_offset)
            else:
                self._assign_epoch_start_offsets(batches)
            if has_producer_ids:
                for info in updated.values():
                    producers.update(info)
                for txn in completed:
                    segment.update_txn_index(txn, producers.last_stable_offset(txn))
                    producers.complete_txn(txn)
            producers.map_end_offset = next_offset
            if flush:
                self.flush()
            return LogAppendInfo(
                first_offset, last_offset, max_ts, max_ts_offset, append_time, self._log_start_offset,
                size, len(batches), num_records, completed_txns=completed,
            )
        finally:
            lock.release()

    @follows_move
    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int) -> VerificationGuard:
        """The guard the next transactional append of this producer must carry: SENTINEL when its
        transaction is already open here (no verification needed), else its pending verification's."""
        with self._lock:
            self._check_not_moved()
            producers = self.producers
            if producers.has_ongoing_transaction(producer_id):
                return SENTINEL_GUARD
            return producers.maybe_create_verification_state_entry(producer_id, sequence, epoch, now_ms()).guard

    def _assign_epoch_start_offsets(self, batches: Batches) -> None:
        """Record each leader epoch a follower append's batches start (magic 0/1 have none)."""
        epochs = self.leader_epoch_cache
        previous = None
        for _, header in batches:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch != previous:  # a repeated epoch would be a no-op
                epochs.assign(epoch, header.base_offset)
                previous = epoch

    # --- rolling and flushing ---------------------------------------------------------------
    def _roll_for_append(self, segment: LogSegment, first_offset: int) -> LogSegment:
        log.info(
            "rolling new segment of %s at offset %d (size %d, offset index full %s, time index full %s)",
            self.topic_partition, max(first_offset, self._next_offset), segment.size,
            segment.offset_index.is_full(), segment.time_index.is_full(),
        )
        return self.roll(first_offset)

    @reports_io_errors
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment; the old one gets its final index entries, a snapshot and an fsync."""
        with self._lock:
            new_offset = max(expected_next_offset or 0, self._next_offset)
            active = self.segments.active
            if active.base_offset == new_offset and active.size == 0:
                return active
            if self.segments.get(new_offset) is not None:
                raise InvalidRecordError(f"trying to roll {self.topic_partition} to existing segment {new_offset}")
            active.on_become_inactive_segment()
            segment = LogSegment.open(
                self.dir, new_offset, self.config,
                rolling_jitter_ms=self.config.random_segment_jitter(), preallocate=self.config.preallocate,
            )
            self.segments.add(segment)
            self.producers.update_map_end_offset(new_offset)
            self.producers.take_snapshot()
            self._flush_upto(new_offset)
            return segment

    @reports_io_errors
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the log end)."""
        with self._lock:
            self._flush_upto(self._next_offset if offset is None else offset)

    def _flush_upto(self, offset: int) -> None:
        """As Kafka's LocalLog.flush: a segment created since the last flush also has its
        directory entry fsynced (the partition directory), so a flushed segment survives a crash."""
        recovery_point = self._recovery_point
        if offset <= recovery_point:
            return
        new_segment = False
        for segment in self.segments.from_offset(recovery_point):
            if segment.base_offset >= offset:
                break
            segment.flush()
            new_segment = new_segment or segment.base_offset >= recovery_point
        if new_segment:
            try:
                fsync_dir(self.dir)
            except FileNotFoundError:  # renamed for deletion meanwhile: nothing left to make durable
                pass
        self._recovery_point = offset
        self.last_flush_ms = now_ms()

    # --- reads ----------------------------------------------------------------------------
    @follows_move
    @reports_io_errors
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
        min_one_message: bool = True,
        max_offset: int | None = None,
    ) -> FetchDataInfo:
        """Whole batches from ``fetch_offset`` up to ``max_bytes``, below the isolation bound.

        ``max_offset`` (exclusive) overrides the bound the isolation level gives.
        """
        with self._lock:
            self._check_not_moved()
            if max_offset is None:
                max_offset = {
                    FetchIsolation.LOG_END: self._next_offset,
                    FetchIsolation.HIGH_WATERMARK: self._high_watermark,
                    FetchIsolation.TXN_COMMITTED: self.last_stable_offset,
                }[isolation]
            if fetch_offset < self._log_start_offset or fetch_offset > self._next_offset:
                raise OffsetOutOfRangeError(
                    f"received request for offset {fetch_offset} for partition {self.topic_partition}, but we only "
                    f"have log segments from offset {self._log_start_offset} up to {self._next_offset}"
                )
            empty = FetchDataInfo(LogOffsetMetadata(fetch_offset), FileRecords.empty())
            if fetch_offset >= max_offset:
                if isolation is FetchIsolation.TXN_COMMITTED:
                    empty.aborted_transactions = []
                return empty
            segment: LogSegment | None = self.segments.floor(fetch_offset)
            while segment is not None:
                try:
                    found = segment.read(fetch_offset, max_bytes, max_offset, min_one_message)
                except CorruptRecordError as exc:
                    raise CorruptRecordStorageError(f"reading {self.topic_partition} at {fetch_offset}: {exc}") from exc
                if found is not None:
                    position, records, end_offset = found
                    info = FetchDataInfo(LogOffsetMetadata(fetch_offset, segment.base_offset, position), records)
                    if isolation is FetchIsolation.TXN_COMMITTED:
                        info.aborted_transactions = self.collect_aborted_transactions(fetch_offset, end_offset)
                    return info
                segment = self.segments.higher(segment.base_offset)
            return empty

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        with self._lock:
            found: list[AbortedTxn] = []
            for segment in self.segments.from_offset(start_offset):
                txns, complete = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
                found.extend(txns)
                if complete:
                    break
            return found

    @follows_move
    @reports_io_errors
    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose timestamp is >= target, or the special earliest/latest/max."""
        with self._lock:
            self._check_not_moved()
            if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                earliest = self.leader_epoch_cache.earliest_entry()
                epoch = earliest.epoch if earliest and earliest.start_offset <= self._log_start_offset else None
                return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, epoch)
            if target_timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, self._next_offset, self.leader_epoch_cache.latest_epoch())
            if target_timestamp == MAX_TIMESTAMP:
                return self._max_timestamp_and_offset()
            for segment in self.segments:
                if segment.largest_timestamp >= target_timestamp:
                    found = segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
                    if found is not None:
                        ts, offset, epoch = found
                        return TimestampAndOffset(ts, offset, epoch if epoch >= 0 else None)
            return None

    def _max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        best = max(self.segments, key=lambda s: s.max_timestamp_so_far.timestamp)
        target = best.max_timestamp_so_far
        if target.timestamp < 0:
            return None
        position = best.offset_index.lookup(target.offset).position
        for pos, header in best.log.entries(position):
            if header.max_timestamp == target.timestamp:
                for record in decode_entry_records(best.log.read(pos, header.size), 0):
                    if record.timestamp == target.timestamp:
                        epoch = header.partition_leader_epoch if header.magic >= 2 else -1
                        return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)
        return None

    @follows_move
    def assign_epoch_at_log_end(self, leader_epoch: int) -> int:
        """Start ``leader_epoch`` at the log end, read under the append lock, and return that offset
        (the broker becoming leader). An append in flight on an I/O thread finishes first, so the
        epoch starts after its batches rather than at the offset one of them took."""
        with self._lock:
            self._check_not_moved()
            self.leader_epoch_cache.assign(leader_epoch, self._next_offset)
            return self._next_offset

    @follows_move
    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset) from the leader-epoch cache."""
        with self._lock:
            self._check_not_moved()
            return self.leader_epoch_cache.end_offset_for(leader_epoch, self._next_offset)

    # --- truncation -----------------------------------------------------------------------
    @follows_move
    @reports_io_errors
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything from ``target_offset`` on (follower truncation); False if nothing to do."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.topic_partition} to a negative offset {target_offset}")
        below_active = target_offset < self.segments.active.base_offset
        with self.truncation_guard() if below_active else nullcontext(), self._lock:
            self._check_not_moved()
            if target_offset >= self._next_offset:
                # Kafka always cuts the epoch cache: a broker that led and assigned an epoch without
                # appending under it must not keep claiming that epoch as a follower.
                self.leader_epoch_cache.truncate_from_end(self._next_offset)
                return False
            self.truncation_count += 1
            first = self.segments.first
            if first is None or target_offset < first.base_offset:
                self._truncate_fully_and_start_at(target_offset)
                return True
            self._delete_segments([s for s in self.segments if s.base_offset > target_offset], "truncation")
            self.segments.active.truncate_to(target_offset)
            self._next_offset = target_offset
            self.leader_epoch_cache.truncate_from_end(target_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self._recovery_point = min(self._recovery_point, target_offset)
            self._high_watermark = min(self._high_watermark, target_offset)
            rebuild_producer_state(self.producers, self.segments, self._log_start_offset, target_offset, now_ms())
            return True

    @follows_move
    @reports_io_errors
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``new_offset``."""
        with self.truncation_guard(), self._lock:
            self._check_not_moved()
            self.truncation_count += 1
            self._truncate_fully_and_start_at(new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        old = list(self.segments)
        self.segments.add(LogSegment.open(self.dir, new_offset, self.config, preallocate=self.config.preallocate))
        self._delete_segments([s for s in old if s.base_offset != new_offset], "truncate fully")
        self.leader_epoch_cache.clear_and_flush()
        self.producers.truncate_fully_and_start_at(new_offset)
        self._log_start_offset = self._next_offset = self._recovery_point = self._high_watermark = new_offset

    # --- retention and log start offset ---------------------------------------------------
    @follows_move
    def maybe_increment_log_start_offset(self, new_log_start_offset: int, from_delete_records: bool = False) -> bool:
        """Advance the log start offset (DeleteRecords, or after segment deletion)."""
        with self._lock:
            self._check_not_moved()
            if from_delete_records and new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot increment the log start offset to {new_log_start_offset} of partition "
                    f"{self.topic_partition} since it is larger than the high watermark {self._high_watermark}"
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            self._log_start_offset = new_log_start_offset
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producers.on_log_start_offset_incremented(new_log_start_offset)
            if self._high_watermark < new_log_start_offset:
                self.update_high_watermark(new_log_start_offset)
            return True

    @reports_io_errors
    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply log start offset, retention.bytes and retention.ms; returns the segments deleted."""
        current = now_ms() if now is None else now
        with self._lock:
            deleted = self._delete_matching(
                lambda s, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset, "log start offset breach"
            )
            if self.config.delete_enabled:
                deleted += self._delete_retention_size_breached()
                if self.config.retention_ms >= 0:
                    deleted += self._delete_matching(
                        lambda s, nxt: current - s.largest_timestamp > self.config.retention_ms, "retention time breach"
                    )
            return deleted

    def _delete_retention_size_breached(self) -> int:
        if self.config.retention_bytes < 0 or self.size < self.config.retention_bytes:
            return 0
        excess = self.size - self.config.retention_bytes

        def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return self._delete_matching(breached, "retention size breach")

    def _delete_matching(self, predicate, reason: str) -> int:  # type: ignore[no-untyped-def]
        segments = list(self.segments)
        deletable = []
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._next_offset
            if nxt is None and segment.size == 0:
                break
            if not (self._high_watermark >= upper and predicate(segment, nxt)):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            new_active = self.roll()
            if deletable[-1] is new_active:
                deletable.pop()
        log.info("deleting %d segments of %s: %s", len(deletable), self.topic_partition, reason)
        self._delete_segments(deletable, reason)
        first = self.segments.first
        assert first is not None
        self.maybe_increment_log_start_offset(first.base_offset)
        return len(deletable)

    def _delete_segments(self, segments: list[LogSegment], reason: str) -> None:
        """Unlink from the log now, rename to .deleted, remove after file.delete.delay.ms."""
        for segment in segments:
            self.segments.remove(segment.base_offset)
            self.producers.remove_snapshot(segment.base_offset)
        self._schedule_deletion(segments, reason)

    def _schedule_deletion(self, segments: list[LogSegment], reason: str) -> None:
        due = now_ms() + self.config.file_delete_delay_ms
        for segment in segments:
            segment.change_file_suffixes("", DELETED_SUFFIX)
            self._pending_deletes.append((due, segment))
            log.debug("scheduled deletion of %s (%s)", segment.log.path, reason)
        if self.config.file_delete_delay_ms == 0:
            self.delete_pending_segments(due)

    # --- compaction ---------------------------------------------------------------------------
    def log_segments(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset) (Kafka's logSegments)."""
        with self._lock:
            return self.segments.values_between(from_offset, to_offset)

    def non_active_segments_from(self, offset: int) -> list[LogSegment]:
        with self._lock:
            active = self.segments.active.base_offset
            return [] if offset > active else self.segments.values_between(offset, active)

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """What the cleaner must keep so each producer's sequence and epoch survive compaction."""
        with self._lock:
            return {
                pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
                for pid, e in self.producers.producers.items()
            }

    def replace_segments(
        self, new_segments: list[LogSegment], old_segments: list[LogSegment], truncation_count: int
    ) -> None:
        """Swap ``.cleaned`` segments in for ``old_segments``, crash-safely (Kafka's replaceSegments).

        The new segments become ``.swap`` (highest offset first, so a crash that leaves any
        ``.cleaned`` file behind rolls the whole swap back at load), then the old segments
        become ``.deleted``, then the ``.swap`` suffixes go; a crash after the ``.swap`` step is
        completed by the loader. Raises LogCleaningAbortedError, touching nothing, when the log
        was truncated since the cleaning read it (``truncation_count`` then differs) or an old
        segment is gone.
        """
        with self._lock:
            if truncation_count != self.truncation_count or any(
                self.segments.get(s.base_offset) is not s for s in old_segments
            ):
                raise LogCleaningAbortedError(f"the segments of {self.topic_partition} changed during cleaning")
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            for segment in reversed(new_sorted):
                segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            for segment in reversed(new_sorted):
                self.segments.add(segment)
            new_bases = {s.base_offset for s in new_sorted}
            old_sorted = sorted(old_segments, key=lambda s: s.base_offset)
            for segment in old_sorted:
                if segment.base_offset not in new_bases:
                    self.segments.remove(segment.base_offset)
                    self.producers.remove_snapshot(segment.base_offset)
            self._schedule_deletion(old_sorted, "replaced by cleaned segments")
            for segment in new_sorted:
                segment.change_file_suffixes(SWAP_SUFFIX, "")
            fsync_dir(self.dir)

    def delete_pending_segments(self, now: int | None = None) -> int:
        """Physically remove .deleted segments whose delay has passed."""
        current = now_ms() if now is None else now
        with self._lock:
            due = [s for t, s in self._pending_deletes if t <= current]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > current]
        for segment in due:
            segment.delete_files()
        return len(due)

    def delete_snapshots_after_recovery_point_checkpoint(self) -> int:
        """Drop producer snapshots no restart can need: below both the recovery point's segment
        and the segment before the active one. Returns the lowest offset kept."""
        with self._lock:
            active = self.segments.active
            before_active = self.segments.floor(active.base_offset - 1)
            two_segments = (before_active or active).base_offset
            below_recovery = self.segments.floor(self._recovery_point - 1)
            keep_from = min(below_recovery.base_offset if below_recovery else self._recovery_point, two_segments)
            self.producers.delete_snapshots_before(keep_from)
            return keep_from

    def active_producers(self) -> list[ProducerStateEntry]:
        """A copy of every tracked producer's state by id (DescribeProducers), taken under the lock
        appends on other threads also hold."""
        with self._lock:
            return [self.producers.producers[pid].copy() for pid in sorted(self.producers.producers)]

    def remove_expired_producers(self, now: int) -> None:
        """Forget producers idle for producer.id.expiration.ms with no open transaction."""
        with self._lock:
            self.producers.remove_expired_producers(now)

    # --- lifecycle ------------------------------------------------------------------------
    @reports_io_errors
    def rename_dir(self, name: str) -> None:
        """Rename this log's directory within its log dir (Kafka's renameDir), files staying open:
        a future log becomes the current one, a replaced log is marked for deletion."""
        with self._lock:
            target = os.path.join(os.path.dirname(os.path.normpath(self.dir)), name)
            os.rename(self.dir, target)
            fsync_dir(os.path.dirname(target))
            self.dir = target
            for segment in self.segments:
                segment.update_parent_dir(target)
            for _, segment in self._pending_deletes:
                segment.update_parent_dir(target)
            self.producers.update_parent_dir(target)
            self.leader_epoch_cache.checkpoint.path = os.path.join(target, LEADER_EPOCH_CHECKPOINT)

    def close(self) -> None:
        """Flush, snapshot producer state at the log end, trim indexes and close files."""
        with self._lock:
            self.flush()
            self.producers.update_map_end_offset(self._next_offset)
            self.producers.take_snapshot()
            for segment in self.segments:
                segment.close()
            self.delete_pending_segments(FOREVER)

    def delete(self) -> None:
        """Close and remove every file of this log (topic deletion)."""
        with self._lock:
            for segment in list(self.segments):
                self.segments.remove(segment.base_offset)
                segment.delete_files()
            self.delete_pending_segments(FOREVER)
