"""LogSegment: one .log file with its offset, time and transaction indexes.

Appends write whole batches and add sparse index entries every index.interval.bytes; reads
translate an offset to a file position through the offset index and a short header scan;
recovery re-validates every batch (CRC, offsets increasing) and rebuilds the indexes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import LOG_OVERHEAD
from storage.abstract_index import INT32_MAX
from storage.clock import now_ms
from storage.errors import CorruptIndexError, CorruptRecordStorageError, IndexOffsetOverflowError
from protocol.records.log_entry import LogEntryHeader, decode_entry_records
from storage.file_records import FileRecords
from storage.leader_epoch_cache import LeaderEpochFileCache
from storage.log_config import LogConfig
from storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_path
from storage.offset_index import OffsetIndex
from storage.producer_state import AppendOrigin, CompletedTxn, ProducerStateManager, read_end_txn_marker
from storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from storage.transaction_index import AbortedTxn, TransactionIndex

MAX_READ_STARTS = 64  # read positions a segment remembers (one per reader going on where it stopped)

log = logging.getLogger(__name__)


class LogSegment:
    def __init__(
        self,
        log_file: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        index_interval_bytes: int,
        rolling_jitter_ms: int,
        max_index_size: int,
    ) -> None:
        self.log = log_file
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.max_index_size = max_index_size
        self.created_ms = now_ms()
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        # sorted, disjoint [start, end) byte ranges known to hold CRC-valid batches (appended
        # through validation or re-read by recovery); reads check anything else first
        self._verified: list[tuple[int, int]] = []
        self.corrupt_position: int | None = None
        self._max_ts: TimestampOffset | None = None  # loaded lazily from the time index
        # Where appends and reads ended, so that the next sequential read (a follower, or a consumer
        # going on from its last fetch) needs neither the index nor a header scan to find its start:
        # offset -> position of the first batch whose last offset reaches it. Truncation clears it.
        self._read_starts: dict[int, int] = {}
        self._appended_end = (-1, -1)  # (file size, next offset) right after the last append

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        config: LogConfig,
        *,
        rolling_jitter_ms: int = 0,
        file_suffix: str = "",
        preallocate: bool = False,
    ) -> LogSegment:
        path = lambda suffix: segment_path(directory, base_offset, suffix, file_suffix)  # noqa: E731
        log_file = FileRecords.open(path(LOG_SUFFIX), preallocate_bytes=config.segment_bytes if preallocate else 0)
        return cls(
            log_file,
            OffsetIndex(path(INDEX_SUFFIX), base_offset, config.max_index_size),
            TimeIndex(path(TIME_INDEX_SUFFIX), base_offset, config.max_index_size),
            TransactionIndex(path(TXN_INDEX_SUFFIX), base_offset),
            base_offset,
            config.index_interval_bytes,
            rolling_jitter_ms,
            config.max_index_size,
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path!r})"

    # --- basic facts -----------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.log)

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry
        return self._max_ts

    @property
    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the file's mtime when no batch has one (retention.ms uses it)."""
        ts = self.max_timestamp_so_far.timestamp
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log.path).st_mtime * 1000)

    def set_last_modified(self, ms: int) -> None:
        """Give the log and time index this mtime (a cleaned segment keeps its sources' age)."""
        for path in (self.log.path, self.time_index.path):
            os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return self.offset_index.can_append_offset(offset)

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not 0 <= offset - self.base_offset <= INT32_MAX:  # can_convert_to_relative_offset, inlined for appends
            raise IndexOffsetOverflowError(
                f"offset {offset} cannot be stored relative to segment base offset {self.base_offset} in {self.log.path}"
            )

    # --- appending --------------------------------------------------------------------------
    def append(
        self, largest_offset: int, largest_timestamp: int, buf: Any, batches: Sequence[tuple[int, LogEntryHeader]]
    ) -> None:
        """Write ``buf`` (already offset-assigned) and index its batches, given as (position in
        ``buf``, header) pairs parsed by the caller."""
        size = len(buf)
        if not size:
            return
        log_file = self.log
        start = log_file.size
        if start == 0:
            self.rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            self._ensure_offset_in_range(largest_offset)  # raises
        log_file.append(buf)
        end = start + size
        self._appended_end = (end, largest_offset + 1)
        self._remember_start(largest_offset + 1, end)
        verified = self._verified
        if verified and verified[-1][1] == start:  # appends grow the last verified range
            verified[-1] = (verified[-1][0], end)
        else:
            self._mark_verified(start, end)
        self._index_batches(batches, start)

    def _index_batches(self, batches: Sequence[tuple[int, LogEntryHeader]], start: int) -> None:
        """Track the max timestamp and add index entries every index.interval.bytes, for batches
        at ``start`` + their position."""
        max_ts = self._max_ts or self.max_timestamp_so_far
        interval = self.index_interval_bytes
        since_last_entry = self.bytes_since_last_index_entry
        for position, header in batches:
            timestamp = header.max_timestamp
            if timestamp > max_ts.timestamp:
                max_ts = self._max_ts = TimestampOffset(timestamp, header.last_offset)
            if since_last_entry > interval:
                self.offset_index.append(header.last_offset, start + position)
                time_index = self.time_index
                # maybe_append adds nothing unless the max timestamp grew, and raises when the
                # index is full (is_full, inlined: a 16 KiB batch gets here on every append)
                if max_ts.timestamp > time_index.last_entry.timestamp or time_index.entries >= time_index.max_entries - 1:
                    time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                since_last_entry = header.batch_length + LOG_OVERHEAD
            else:
                since_last_entry += header.batch_length + LOG_OVERHEAD
        self.bytes_since_last_index_entry = since_last_entry

    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        if completed.is_aborted:
            self.txn_index.append(
                AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, last_stable_offset)
            )

    def update_producer_state(
        self, producers: ProducerStateManager, header: LogEntryHeader, batch: Any, record_aborts: bool = True
    ) -> None:
        """Replay one batch into the producer state; recovery also re-records aborts in the txn index."""
        if header.magic >= 2 and header.producer_id >= 0:
            info = producers.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
            completed = None
            if header.is_control:
                marker = read_end_txn_marker(batch)
                if marker is not None:
                    completed = info.append_end_txn_marker(
                        marker, header.producer_epoch, header.base_offset, header.max_timestamp
                    )
            else:
                info.append_data_batch(
                    header.producer_epoch, header.base_sequence, header.last_sequence, header.max_timestamp,
                    header.base_offset, header.last_offset, header.is_transactional,
                )
            producers.update(info)
            if completed is not None:
                if record_aborts:
                    self.update_txn_index(completed, producers.last_stable_offset(completed))
                producers.complete_txn(completed)
        producers.update_map_end_offset(header.last_offset + 1)

    # --- reading ----------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, LogEntryHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        mapping = self.offset_index.lookup(offset)
        for position, header in self.log.entries(max(mapping.position, starting_position)):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self, start_offset: int, max_size: int, max_offset: int | None = None, min_one_message: bool = False
    ) -> tuple[int, FileRecords, int] | None:
        """(position, whole-batch slice, offset after it) from the batch holding ``start_offset``.

        None when the offset lies past this segment.

        Stops before the first batch whose last offset reaches ``max_offset`` (the high watermark
        or last stable offset) or that would pass ``max_size`` (unless it is the first and
        ``min_one_message``).
        """
        log_size = self.log.size
        start = self._read_starts.get(start_offset, -1)
        if 0 <= start <= log_size:  # where an earlier read or append ended
            found = next(self.log.entries(start), None) if start < log_size else None
        else:
            found = self.translate_offset(start_offset)
        if found is None:
            return None
        start, first = found
        end, end_offset = start, (first.base_offset if first.magic >= 2 else start_offset)
        appended_size, appended_next = self._appended_end
        if (appended_size == log_size and start < log_size and log_size - start <= max_size
                and (max_offset is None or appended_next <= max_offset)):
            scan_from = log_size  # the rest of an appended-to segment: every batch fits, none to scan
            end, end_offset = log_size, appended_next
        else:
            scan_from = self._index_jump(start, max_size, max_offset)
            if scan_from > start:
                end, end_offset = scan_from, None  # whole batches up to an indexed batch start, unscanned
        try:
            for position, header in self.log.entries(scan_from):
                if end_offset is None:
                    end_offset = header.base_offset if header.magic >= 2 else header.last_offset
                if max_offset is not None and header.last_offset >= max_offset:
                    break
                if position + header.size - start > max_size and not (min_one_message and end == start):
                    break
                end = position + header.size
                end_offset = header.next_offset
        except CorruptRecordError as exc:
            self._mark_corrupt(end, exc)
            if end == start:
                raise CorruptRecordStorageError(f"batch at position {end} of {self.log.path} is corrupt: {exc}") from exc
        if end_offset is None:  # nothing readable at an indexed start; remembering this, the segment's
            # next offset, is harmless: Log.read never asks this segment for it
            end_offset = self.read_next_offset()
        if self._first_unverified(start, end) < end:
            end, end_offset = self._verify(start, end, end_offset)
        if end > start:
            self._remember_start(end_offset, end)
        return start, self.log.slice(start, end - start), end_offset

    def _remember_start(self, offset: int, position: int) -> None:
        """``offset`` is at ``position``: the batch there (if any) is the first whose last offset reaches it."""
        starts = self._read_starts
        starts[offset] = position
        if len(starts) > MAX_READ_STARTS:
            del starts[next(iter(starts))]  # the oldest

    def _index_jump(self, start: int, max_size: int, max_offset: int | None) -> int:
        """The last indexed batch start within ``max_size`` of ``start`` whose predecessors all lie
        below ``max_offset``: the batches before it are served without reading their headers."""
        index = self.offset_index
        slot = index.largest_lower_bound_slot(start + max_size, by_value=True)
        if max_offset is not None:
            slot = min(slot, index.largest_lower_bound_slot(max_offset, by_value=False))
        if slot >= 0:
            position = index.entry(slot).position
            if position > start:
                return position
        return start

    def _mark_verified(self, start: int, end: int) -> None:
        verified = self._verified
        if verified:
            lo, hi = verified[-1]
            if lo <= start <= hi:  # appends: grow the last range in O(1)
                verified[-1] = (lo, max(hi, end))
                return
        if not verified or verified[-1][1] < start:
            verified.append((start, end))
            return
        merged = (start, end)
        kept = []
        for lo, hi in verified:
            if hi < merged[0] or lo > merged[1]:
                kept.append((lo, hi))
            else:
                merged = (min(lo, merged[0]), max(hi, merged[1]))
        kept.append(merged)
        self._verified = sorted(kept)

    def _first_unverified(self, start: int, end: int) -> int:
        """The first byte of [start, end) not known to be valid (``end`` if all are); a batch boundary."""
        position = start
        for lo, hi in self._verified:
            if lo <= position < hi:
                position = hi
            elif lo > position:
                break
        return min(position, end)

    def _verify(self, start: int, end: int, end_offset: int) -> tuple[int, int]:
        """CRC-check the unverified part of [start, end) before serving it; cut before a corrupt batch."""
        begin = self._first_unverified(start, end)
        good_end, good_offset = begin, end_offset
        try:
            for position, header, _ in self.log.entries_with_data(begin, end):
                good_end, good_offset = position + header.size, header.next_offset
        except CorruptRecordError as exc:
            self._mark_corrupt(good_end, exc)
            if good_end <= start:
                raise CorruptRecordStorageError(f"batch at position {good_end} of {self.log.path} is corrupt: {exc}") from exc
            self._mark_verified(start, good_end)
            return good_end, good_offset
        self._mark_verified(start, end)
        return end, end_offset

    def _mark_corrupt(self, position: int, exc: Exception) -> None:
        log.error("corrupt batch in %s at position %d is not served: %s", self.log.path, position, exc)
        self.corrupt_position = position if self.corrupt_position is None else min(position, self.corrupt_position)

    def read_next_offset(self) -> int:
        """The offset after the last batch (base offset when empty)."""
        last = None
        for _, header in self.log.entries(self.offset_index.lookup(self.offset_index.last_offset).position):
            last = header
        return last.next_offset if last is not None else self.base_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record at or after ``timestamp``."""
        ts_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_offset.offset, starting_offset)).position
        for pos, header in self.log.entries(position):
            if header.max_timestamp >= timestamp:
                for record in decode_entry_records(self.log.read(pos, header.size), 0):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = header.partition_leader_epoch if header.magic >= 2 else -1
                        return record.timestamp, record.offset, epoch
        return None

    def first_batch_timestamp(self) -> int:
        for _, header in self.log.entries(0):
            return header.max_timestamp
        return NO_TIMESTAMP

    def _rolling_timestamp(self) -> int | None:
        """The max timestamp of the first append (or first batch, read lazily after a reload)."""
        if self.rolling_based_timestamp is None and self.size > 0:
            self.rolling_based_timestamp = self.first_batch_timestamp()
        return self.rolling_based_timestamp

    def first_batch_timestamp_or_max(self) -> int:
        """Kafka's getFirstBatchTimestamp (max.compaction.lag.ms): Long.MAX when there is none."""
        ts = self._rolling_timestamp()
        return ts if ts is not None and ts >= 0 else (1 << 63) - 1

    # --- rolling ----------------------------------------------------------------------------
    def time_waited_for_roll(self, now: int | None, message_timestamp: int) -> int:
        ts = self._rolling_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return (now_ms() if now is None else now) - self.created_ms

    def should_roll(
        self, max_segment_bytes: int, max_segment_ms: int, messages_size: int,
        max_timestamp_in_messages: int, max_offset_in_messages: int, now: int | None,
    ) -> bool:
        """Kafka's conditions, cheapest first; this runs on every append. ``now`` (None: read the
        clock) matters only to a segment whose batches carry no timestamp."""
        size = self.log.size
        if size > max_segment_bytes - messages_size:
            return True
        offset_index, time_index = self.offset_index, self.time_index
        if offset_index.entries >= offset_index.max_entries or time_index.entries >= time_index.max_entries - 1:
            return True  # an index is full (TimeIndex.is_full keeps one slot for the roll's final entry)
        if not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX:
            return True
        if size == 0:
            return False
        based = self.rolling_based_timestamp
        waited = max_timestamp_in_messages - based if based is not None and based >= 0 \
            else self.time_waited_for_roll(now, max_timestamp_in_messages)
        return waited > max_segment_ms - self.rolling_jitter_ms

    def on_become_inactive_segment(self) -> None:
        """Force a final time-index entry and trim the preallocated files."""
        self.time_index.maybe_append(self.max_timestamp_so_far.timestamp, self.max_timestamp_so_far.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim_to_size()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # --- truncation and recovery ------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset`` on; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.resize_indexes(self.max_index_size)
        removed = 0 if mapping is None else self.log.truncate_to(mapping[0])
        self._read_starts.clear()
        self._verified = [(lo, min(hi, self.size)) for lo, hi in self._verified if lo < self.size]
        if self.size == 0:
            self.created_ms = now_ms()
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far.timestamp >= 0:
            self._load_largest_timestamp()
        return removed

    def _load_largest_timestamp(self) -> None:
        last = self.time_index.last_entry
        self._max_ts = last
        for _, header in self.log.entries(self.offset_index.lookup(last.offset).position):
            if header.max_timestamp > self._max_ts.timestamp:
                self._max_ts = TimestampOffset(header.max_timestamp, header.last_offset)

    def recover(self, producers: ProducerStateManager | None = None, epochs: LeaderEpochFileCache | None = None) -> int:
        """Re-validate every batch, rebuild the indexes, truncate at the first bad one; returns bytes cut."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self.bytes_since_last_index_entry = 0
        valid_bytes = 0
        next_offset = self.base_offset
        try:
            for position, header, data in self.log.entries_with_data(0):
                first = header.base_offset if header.magic >= 2 else header.last_offset
                if first < next_offset:
                    raise CorruptRecordError(
                        f"offsets go backwards at position {position}: batch starts at {first}, expected >= {next_offset}"
                    )
                self._ensure_offset_in_range(header.last_offset)
                self._index_batches(((position, header),), 0)
                valid_bytes += header.size
                next_offset = header.last_offset + 1
                if header.magic >= 2:
                    if epochs is not None and header.partition_leader_epoch >= 0:
                        latest = epochs.latest_epoch()
                        if latest is None or header.partition_leader_epoch > latest:
                            epochs.assign(header.partition_leader_epoch, header.base_offset)
                    if producers is not None:
                        self.update_producer_state(producers, header, data)
        except (CorruptRecordError, IndexOffsetOverflowError) as exc:
            log.warning("found invalid data in log segment %s at byte position %d: %s", self.log.path, valid_bytes, exc)
        truncated = self.size - valid_bytes
        self._verified = [(0, valid_bytes)]
        self._read_starts.clear()
        if truncated > 0:
            log.warning("truncating %s to %d bytes (%d invalid bytes removed)", self.log.path, valid_bytes, truncated)
            self.log.truncate_to(valid_bytes)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(self.max_timestamp_so_far.timestamp, self.max_timestamp_so_far.offset, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index is missing, malformed or points past the data."""
        for index in (self.offset_index, self.time_index):
            if not os.path.exists(index.path):
                raise CorruptIndexError(f"index file {index.path} is missing")
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            if last.position >= self.size:
                raise CorruptIndexError(
                    f"index {self.offset_index.path} points at position {last.position} past the end of "
                    f"{self.log.path} ({self.size} bytes)"
                )
            # Kafka indexes a whole append (a follower's chunk of several batches) under its largest
            # offset at its first batch's position: a batch from there on must end at that offset.
            found = self.translate_offset(last.offset, last.position)
            if found is None or found[0] < last.position or found[1].last_offset != last.offset:
                raise CorruptIndexError(
                    f"index {self.offset_index.path} entry ({last.offset}, {last.position}) does not match "
                    f"a batch in {self.log.path}"
                )

    # --- files ------------------------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. "" -> ".deleted" or ".swap" -> ""."""
        for item in (self.log, self.offset_index, self.time_index, self.txn_index):
            stem = item.path[: len(item.path) - len(old_suffix)] if old_suffix else item.path
            if os.path.exists(item.path):
                item.rename_to(stem + new_suffix)
            else:
                item.path = stem + new_suffix

    def update_parent_dir(self, directory: str) -> None:
        """The log's directory was renamed (Kafka's updateParentDir): the files keep their names."""
        for item in (self.log, self.offset_index, self.time_index, self.txn_index):
            item.path = os.path.join(directory, os.path.basename(item.path))

    def close(self) -> None:
        """Like a roll: force the final time-index entry (if it fits), trim everything, close."""
        index = self.time_index
        if self._max_ts is not None and self._max_ts.timestamp > index.last_entry.timestamp and index.entries < index.max_entries:
            index.maybe_append(self._max_ts.timestamp, self._max_ts.offset, skip_full_check=True)
        self.offset_index.close()
        index.close()
        self.log.trim_to_size()
        self.log.close()

    def delete_files(self) -> None:
        """Unlink every file of the segment (after its .deleted delay)."""
        self.offset_index.delete_if_exists()
        self.time_index.delete_if_exists()
        self.txn_index.delete_if_exists()
        self.log.close()
        try:
            os.remove(self.log.path)
        except FileNotFoundError:
            pass
