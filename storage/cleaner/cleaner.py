"""Cleaner: one compaction round of one log (Kafka's Cleaner).

1. Build the offset map over the dirty section [first dirty offset, first uncleanable
   offset): the latest offset of every key, skipping aborted transactional data, until the map
   is full; the round then covers the log up to the map's latest offset.
2. Group the segments up to there so that no group exceeds segment.bytes or the index sizes.
3. Copy each group into one ``.cleaned`` segment, keeping per batch what Kafka keeps (see
   ``_clean_into``), and swap it in with the log's crash-safe replace protocol.

The segments are read without the log's lock: only the active segment changes under appends
and it is never cleaned; truncations pause the log's cleaning first, and the swap re-checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.records.batch import NO_TIMESTAMP, read_batch_header
from protocol.records.control import ControlRecordType, parse_control_type
from protocol.records.log_entry import LogEntryHeader, decode_entry_records, read_log_entry
from protocol.records.legacy import build_message_set
from protocol.records.record import Record
from storage.cleaner.cleaning_source import (
    CleaningSource,
    LocalCleaningSource,
    SegmentToClean,
    discard,
    new_cleaned_segment,
)
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.record_filter import (
    BatchRetention,
    empty_batch,
    index_keys,
    rebuild_batch,
    record_data,
    select_records,
)
from storage.cleaner.throttler import Throttler
from storage.cleaner.transaction_metadata import CleanedTransactionMetadata
from storage.log import LastRecord
from storage.log_segment import LogSegment, now_ms

if TYPE_CHECKING:
    from storage.cleaner.log_cleaner_manager import LogToClean

log = logging.getLogger("storage.cleaner.LogCleaner")

MIN_IO_BUFFER = 4096
KEEP_ALL = -2  # a "latest offset" below every offset: select_records keeps every record


@dataclass
class CleanerStats:
    start_s: float = field(default_factory=time.monotonic)
    map_complete_s: float = -1.0
    end_s: float = -1.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    invalid_messages_read: int = 0
    messages_written: int = 0
    buffer_utilization: float = 0.0

    def index_done(self) -> None:
        self.map_complete_s = time.monotonic()

    def all_done(self) -> None:
        self.end_s = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return self.end_s - self.start_s

    @property
    def elapsed_index_secs(self) -> float:
        return self.map_complete_s - self.start_s


class _CleanedWriter:
    """Buffers retained batches and appends them to the cleaned segment one buffer at a time."""

    def __init__(self, dest: LogSegment, buffer_size: int, throttler: Throttler, stats: CleanerStats) -> None:
        self.dest = dest
        self.buffer_size = buffer_size
        self.throttler = throttler
        self.stats = stats
        self._buf = bytearray()
        self._batches: list[tuple[int, LogEntryHeader]] = []
        self._max_ts = NO_TIMESTAMP

    def append(self, data: bytes | memoryview, header: LogEntryHeader, records: int) -> None:
        self._batches.append((len(self._buf), header))
        self._buf += data
        self._max_ts = max(self._max_ts, header.max_timestamp)
        self.stats.bytes_written += len(data)
        self.stats.messages_written += records
        if len(self._buf) >= self.buffer_size:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        buf, batches = self._buf, self._batches
        self.dest.append(batches[-1][1].last_offset, self._max_ts, buf, batches)
        self.throttler.maybe_throttle(len(buf))
        self._buf, self._batches, self._max_ts = bytearray(), [], NO_TIMESTAMP


class Cleaner:
    def __init__(
        self, cleaner_id: int, offset_map: OffsetMap, io_buffer_size: int, max_io_buffer_size: int,
        dup_buffer_load_factor: float, throttler: Throttler, check_done: Callable[[tuple[str, int]], None],
    ) -> None:
        if offset_map.slots * dup_buffer_load_factor <= 1:
            raise ValueError(
                "offset map is too small to fit in even a single message, so log cleaning will never make progress. "
                "You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads"
            )
        self.id = cleaner_id
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, MIN_IO_BUFFER)
        self.max_io_buffer_size = max_io_buffer_size
        self.dup_buffer_load_factor = dup_buffer_load_factor
        self.throttler = throttler
        self.check_done = check_done

    def clean(self, cleanable: LogToClean) -> tuple[int, CleanerStats]:
        return self.do_clean(cleanable, now_ms())

    def do_clean(self, cleanable: LogToClean, current_time: int) -> tuple[int, CleanerStats]:
        """One round on a log of this process (see ``clean_source``)."""
        return self.clean_source(LocalCleaningSource(cleanable.log), cleanable.first_dirty_offset,
                                 cleanable.first_uncleanable_offset, current_time)

    def clean_source(self, source: CleaningSource, first_dirty_offset: int, upper_bound: int,
                     current_time: int) -> tuple[int, CleanerStats]:
        """Clean up to the first uncleanable offset (or as far as the offset map reaches);
        returns the next first dirty offset and the statistics."""
        log.info("Cleaner %d: Beginning cleaning of log %s", self.id, source.topic_partition)
        clean_section = source.segments(0, first_dirty_offset)
        # the tombstone horizon of magic 0/1 data, which has no per-batch delete horizon
        legacy_delete_horizon_ms = (
            clean_section[-1].last_modified_ms - source.config.delete_retention_ms if clean_section else 0
        )
        stats = CleanerStats()
        self.build_offset_map(source, first_dirty_offset, upper_bound, self.offset_map, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        transactions = CleanedTransactionMetadata()
        groups = self.group_segments_by_size(
            source.segments(0, end_offset), source.config.segment_bytes, source.config.max_index_size, upper_bound
        )
        for group in groups:
            self.clean_segments(source, group, current_time, stats, transactions, legacy_delete_horizon_ms,
                                upper_bound)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return end_offset, stats

    # --- grouping ---------------------------------------------------------------------------
    @staticmethod
    def group_segments_by_size(
        segments: list[SegmentToClean], max_size: int, max_index_size: int, first_uncleanable_offset: int
    ) -> list[list[SegmentToClean]]:
        """Consecutive segments whose total log, offset index and time index sizes stay within the
        limits and whose offsets fit one segment's int32 relative offsets."""
        groups: list[list[SegmentToClean]] = []
        i = 0
        while i < len(segments):
            first = segments[i]
            group = [first]
            log_size, index_size, time_size = first.size, first.offset_index_bytes, first.time_index_bytes
            i += 1
            while i < len(segments):
                candidate = segments[i]
                last_offset = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
                if not (
                    log_size + candidate.size <= max_size
                    and index_size + candidate.offset_index_bytes <= max_index_size
                    and time_size + candidate.time_index_bytes <= max_index_size
                    and (candidate.size == 0 or last_offset - group[0].base_offset <= 2**31 - 1)
                ):
                    break
                group.append(candidate)
                log_size += candidate.size
                index_size += candidate.offset_index_bytes
                time_size += candidate.time_index_bytes
                i += 1
            groups.append(group)
        return groups

    # --- the offset map ---------------------------------------------------------------------
    def build_offset_map(self, source: CleaningSource, start: int, end: int, offset_map: OffsetMap,
                         stats: CleanerStats) -> None:
        """Map each key of [start, end) to its latest offset, segment by segment, until full."""
        offset_map.clear()
        offset_map.start_offset = start
        dirty = source.segments(start, end)
        log.info("Cleaner %d: Building offset map for log %s for %d segments in offset range [%d, %d).",
                 self.id, source.topic_partition, len(dirty), start, end)
        transactions = CleanedTransactionMetadata()
        transactions.add_aborted_transactions(source.aborted_transactions(start, end))
        tp = _topic_partition(source)
        for i, segment in enumerate(dirty):
            self.check_done(tp)
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._build_offset_map_for_segment(tp, segment, offset_map, start, next_start, transactions, stats):
                log.debug("Cleaner %d: offset map is full, %d segments fully mapped, segment with base offset %d "
                          "is partially mapped", self.id, i, segment.base_offset)
                break
        log.info("Cleaner %d: Offset map for log %s complete.", self.id, source.topic_partition)

    def _build_offset_map_for_segment(
        self, tp: tuple[str, int], segment: SegmentToClean, offset_map: OffsetMap, start_offset: int,
        next_segment_start: int, transactions: CleanedTransactionMetadata, stats: CleanerStats,
    ) -> bool:
        """Add the segment's keys; True when the map filled up before the segment's end."""
        max_entries = int(offset_map.slots * self.dup_buffer_load_factor)
        entries = offset_map.entries
        max_output = self.max_io_buffer_size
        pending = 0
        for _, header, view in segment.log.entries_with_data(segment.start_position, chunk=self.io_buffer_size):
            pending += header.size
            if pending >= self.io_buffer_size:
                self._checkpoint_io(tp, pending)
                pending = 0
            count = header.record_count
            if header.magic >= 2 and header.is_control:
                transactions.on_control_batch_read(header, *_control_type(view, header))
                stats.map_messages_read += 1
            elif transactions.on_batch_read(header):
                stats.map_messages_read += count  # aborted: none of its keys count
            else:
                if header.magic >= 2:
                    data = record_data(view, header, max_output)
                    last, full = index_keys(data, count, header.base_offset, start_offset, entries, max_entries)
                else:
                    last, full = _index_legacy_keys(decode_entry_records(view, 0), start_offset, entries, max_entries)
                if last >= 0:
                    offset_map.latest_offset = last
                if full:
                    stats.map_bytes_read += pending
                    return True
                stats.map_messages_read += count
            if header.last_offset >= start_offset:
                offset_map.update_latest_offset(header.last_offset)
            stats.map_bytes_read += header.size
        if pending:
            self.throttler.maybe_throttle(pending)
        offset_map.update_latest_offset(next_segment_start - 1)  # past any gap at the segment's end
        return False

    def _checkpoint_io(self, tp: tuple[str, int], read: int) -> None:
        """Once per I/O buffer read, as Kafka: stop if aborted, and throttle."""
        self.check_done(tp)
        self.throttler.maybe_throttle(read)

    # --- copying ----------------------------------------------------------------------------
    def clean_segments(
        self, source: CleaningSource, segments: list[SegmentToClean], current_time: int, stats: CleanerStats,
        transactions: CleanedTransactionMetadata, legacy_delete_horizon_ms: int, upper_bound: int,
    ) -> None:
        """Copy a group of segments into one ``.cleaned`` segment and swap it in."""
        cleaned = new_cleaned_segment(source.dir, segments[0].base_offset, source.config)
        transactions.cleaned_index = cleaned.txn_index
        try:
            producers = source.active_producers()
            writer = _CleanedWriter(cleaned, self.io_buffer_size, self.throttler, stats)
            for i, segment in enumerate(segments):
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.next_offset
                transactions.add_aborted_transactions(source.aborted_transactions(segment.base_offset, upper))
                retain_legacy_deletes = segment.last_modified_ms > legacy_delete_horizon_ms
                log.info("Cleaner %d: Cleaning %s in log %s into %d, %s deletes.", self.id, segment,
                         source.topic_partition, cleaned.base_offset,
                         "retaining" if retain_legacy_deletes else "discarding")
                self._clean_into(source, segment, writer, retain_legacy_deletes, transactions, producers,
                                 upper_bound, stats, current_time)
                writer.flush()
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified(segments[-1].last_modified_ms)
        except BaseException:
            discard(cleaned)
            raise
        log.info("Cleaner %d: Swapping in cleaned segment %s for segment(s) %s in log %s", self.id, cleaned,
                 segments, source.topic_partition)
        source.swap(cleaned, [segment.base_offset for segment in segments])

    def _clean_into(
        self, source: CleaningSource, segment: SegmentToClean, writer: _CleanedWriter, retain_legacy_deletes: bool,
        transactions: CleanedTransactionMetadata, producers: dict[int, LastRecord], upper_bound: int,
        stats: CleanerStats, current_time: int,
    ) -> None:
        """Kafka's cleanInto with its log cleaner RecordFilter, one batch at a time.

        A batch is dropped whole when its transaction was aborted (or, for a marker, when it may
        go and its delete horizon has passed), kept as an empty header when it is the last batch
        of a live producer or of the cleaning round, copied byte for byte when every record
        stays, and rebuilt otherwise; tombstones and removable markers get a delete horizon of
        now + delete.retention.ms the first time they are copied, and are dropped by a later
        round once it has passed.
        """
        offset_map = self.offset_map
        entries, latest, mapped_from = offset_map.entries, offset_map.latest_offset, offset_map.start_offset
        delete_retention_ms = source.config.delete_retention_ms
        max_output = self.max_io_buffer_size
        tp = _topic_partition(source)
        pending = 0
        for _, header, view in segment.log.entries_with_data(0, chunk=self.io_buffer_size):
            size = header.size
            stats.bytes_read += size
            pending += size
            if pending >= self.io_buffer_size:
                self._checkpoint_io(tp, pending)
                pending = 0
            if header.magic < 2:
                self._clean_legacy(header, view, writer, transactions, retain_legacy_deletes, stats)
                continue
            is_control = header.is_control
            if is_control:
                can_discard = transactions.on_control_batch_read(header, *_control_type(view, header))
                discard_records = can_discard and header.has_delete_horizon and header.base_timestamp <= current_time
            else:
                can_discard = discard_records = transactions.on_batch_read(header)
            last = producers.get(header.producer_id) if header.producer_id >= 0 else None
            if last is not None and (
                header.last_offset == last.last_data_offset if last.last_data_offset is not None
                else is_control and header.producer_epoch == last.producer_epoch
            ):
                retention = BatchRetention.RETAIN_EMPTY
            elif header.next_offset == upper_bound:
                retention = BatchRetention.RETAIN_EMPTY  # keeps the round's last offset in the log
            elif discard_records:
                retention = BatchRetention.DELETE
            else:
                retention = BatchRetention.DELETE_EMPTY
            if retention is BatchRetention.DELETE:
                continue
            count = header.record_count
            stats.messages_read += count
            if discard_records or not count:
                kept = 0
            elif is_control:
                kept, data, selection = count, None, None
            elif (mapped_from <= header.base_offset and header.last_offset <= latest
                  and not header.has_delete_horizon
                  and not offset_map.any_latest_between(header.base_offset, header.last_offset)):
                kept = 0  # every record of this dirty batch has a later update: no need to read it
            else:
                data = record_data(view, header, max_output)
                retain_deletes = not header.has_delete_horizon or current_time < header.base_timestamp
                selection = select_records(data, count, header.base_offset, entries, latest, retain_deletes)
                stats.invalid_messages_read += selection.keyless
                kept = len(selection.kept)
            if kept:
                tombstones = selection is not None and selection.contains_tombstones
                set_horizon = (tombstones or (can_discard and is_control)) and not header.has_delete_horizon
                if kept == count and not set_horizon:
                    writer.append(view[:size], header, kept)
                    continue
                if selection is None:  # a marker that needs its delete horizon
                    data = record_data(view, header, max_output)
                    selection = select_records(data, count, header.base_offset, {}, KEEP_ALL, True)
                if set_horizon:
                    horizon = current_time + delete_retention_ms
                else:
                    horizon = header.base_timestamp if header.has_delete_horizon else NO_TIMESTAMP
                assert data is not None
                rebuilt = rebuild_batch(header, data, selection.kept, horizon)
                writer.append(rebuilt, read_batch_header(rebuilt), kept)
            elif retention is BatchRetention.RETAIN_EMPTY:
                empty = empty_batch(header)
                writer.append(empty, read_batch_header(empty), 0)
        if pending:
            self.throttler.maybe_throttle(pending)

    def _clean_legacy(
        self, header: LogEntryHeader, view: memoryview, writer: _CleanedWriter,
        transactions: CleanedTransactionMetadata, retain_deletes: bool, stats: CleanerStats,
    ) -> None:
        """A magic 0/1 entry: its records are kept by the same rule; tombstones by segment age."""
        transactions.on_batch_read(header)
        records = decode_entry_records(view, 0)
        stats.messages_read += len(records)
        entries, latest = self.offset_map.entries, self.offset_map.latest_offset
        kept = []
        for record in records:
            if record.offset > latest:
                kept.append(record)
            elif record.key is None:
                stats.invalid_messages_read += 1
            elif record.offset >= entries.get(record.key, -1) and (record.value is not None or retain_deletes):
                kept.append(record)
        if len(kept) == len(records):
            writer.append(view[: header.size], header, len(kept))
        elif kept:
            append_time = header.max_timestamp if header.timestamp_type == 1 else None
            rebuilt = bytes(build_message_set(
                header.magic, header.compression, kept[0].offset,
                [(r.offset, r.timestamp, r.key, r.value) for r in kept], append_time,
            ))
            writer.append(rebuilt, read_log_entry(rebuilt, 0), len(kept))


def _topic_partition(source: CleaningSource) -> tuple[str, int]:
    topic, _, partition = source.topic_partition.rpartition("-")
    return topic, int(partition)


def _control_type(view: memoryview, header: LogEntryHeader) -> tuple[ControlRecordType | None, bool]:
    """(the marker type, whether the batch is empty) of a control batch."""
    if not header.record_count:
        return None, True
    return parse_control_type(decode_entry_records(view, 0)[0].key), False


def _index_legacy_keys(
    records: list[Record], start_offset: int, entries: dict[bytes, int], max_entries: int
) -> tuple[int, bool]:
    last = -1
    for record in records:
        if record.key is not None and record.offset >= start_offset:
            if len(entries) >= max_entries:
                return last, True
            entries[record.key] = record.offset
            last = record.offset
    return last, False
