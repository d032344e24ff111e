"""LogLoader: opens a partition directory at startup, completing or discarding interrupted work.

Stray ``.deleted``/``.cleaned`` files are removed, ``.swap`` files are completed, segments
with missing or broken indexes are recovered, and after an unclean shutdown every segment
from the recovery point on is re-validated batch by batch; then producer state is rebuilt
from the newest snapshot plus the log after it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from storage.errors import CorruptIndexError
from storage.file_records import FileRecords
from storage.leader_epoch_cache import LeaderEpochFileCache
from storage.log_config import LogConfig
from storage.log_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    offset_from_file_name,
    segment_path,
)
from storage.log_segment import LogSegment
from storage.log_segments import LogSegments
from storage.producer_state import ProducerStateManager

log = logging.getLogger(__name__)


@dataclass
class LoadedLogOffsets:
    log_start_offset: int
    recovery_point: int
    next_offset: int


def _remove(path: str, why: str) -> None:
    log.info("deleting %s (%s)", path, why)
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def rebuild_producer_state(
    producers: ProducerStateManager, segments: LogSegments, log_start_offset: int, end_offset: int, now_ms: int
) -> None:
    """Load the newest usable snapshot and replay the log after it up to ``end_offset``."""
    producers.truncate_and_reload(log_start_offset, end_offset, now_ms)
    start = producers.map_end_offset
    if end_offset > start:
        for segment in segments.from_offset(start):
            found = segment.translate_offset(max(start, segment.base_offset))
            if found is None:
                continue
            for position, header in segment.log.entries(found[0]):
                if header.next_offset > end_offset:
                    break
                needs_data = header.magic >= 2 and header.is_control and header.producer_id >= 0
                batch = segment.log.read(position, header.size) if needs_data else b""
                segment.update_producer_state(producers, header, batch, record_aborts=False)
    producers.update_map_end_offset(end_offset)
    producers.take_snapshot()


class LogLoader:
    def __init__(
        self,
        directory: str,
        config: LogConfig,
        segments: LogSegments,
        producers: ProducerStateManager,
        epochs: LeaderEpochFileCache,
        *,
        log_start_offset: int,
        recovery_point: int,
        had_clean_shutdown: bool,
        now_ms: int,
    ) -> None:
        self.dir = directory
        self.config = config
        self.segments = segments
        self.producers = producers
        self.epochs = epochs
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.had_clean_shutdown = had_clean_shutdown
        self.now_ms = now_ms

    def load(self) -> LoadedLogOffsets:
        swap_logs = self._remove_temp_files_and_collect_swap_files()
        self._complete_swaps(swap_logs)
        self._load_segment_files()
        if self.epochs.was_corrupt:
            self._rebuild_epochs_from_headers()
        if not self.had_clean_shutdown:
            self._recover_log()
        if not len(self.segments):
            self.segments.add(
                LogSegment.open(self.dir, self.log_start_offset, self.config, preallocate=self.config.preallocate)
            )
        active = self.segments.active
        next_offset = active.read_next_offset()
        active.resize_indexes(self.config.max_index_size)
        self.epochs.truncate_from_end(next_offset)
        first = self.segments.first
        assert first is not None
        log_start_offset = max(self.log_start_offset, first.base_offset)
        self.epochs.truncate_from_start(log_start_offset)
        rebuild_producer_state(self.producers, self.segments, log_start_offset, next_offset, self.now_ms)
        return LoadedLogOffsets(log_start_offset, min(self.recovery_point, next_offset), next_offset)

    def _remove_temp_files_and_collect_swap_files(self) -> list[str]:
        """Kafka's removeTempFilesAndCollectSwapFiles: a ``.cleaned`` file means its cleaning never
        reached the swap, so every ``.swap`` file at or above the lowest such offset goes too."""
        swaps: list[tuple[int, str]] = []
        cleaned: list[str] = []
        min_cleaned: int | None = None
        for name in sorted(os.listdir(self.dir)):
            path = os.path.join(self.dir, name)
            if not os.path.isfile(path):
                continue
            offset = offset_from_file_name(name)
            if name.endswith(DELETED_SUFFIX):
                _remove(path, "leftover of an asynchronous delete")
            elif name.endswith(".tmp"):
                _remove(path, "leftover of an interrupted atomic write")
            elif name.endswith(CLEANED_SUFFIX) and offset is not None:
                min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
                cleaned.append(path)
            elif name.endswith(SWAP_SUFFIX) and offset is not None:
                swaps.append((offset, path))
        valid = []
        for offset, path in swaps:
            if min_cleaned is not None and offset >= min_cleaned:
                _remove(path, "swap file of an interrupted cleaning")
            else:
                valid.append(path)
        for path in cleaned:
            _remove(path, "leftover of an interrupted cleaning")
        return valid

    def _complete_swaps(self, swap_files: list[str]) -> None:
        """A crash after every new segment became ``.swap``: delete what the swap segments replace
        (every file named in [lowest swap base, highest swap end)) and drop the suffixes."""
        low = high = None
        for swap in swap_files:
            if not swap[: -len(SWAP_SUFFIX)].endswith(LOG_SUFFIX):
                continue
            base = offset_from_file_name(swap)
            assert base is not None
            records = FileRecords.open(swap, read_only=True)
            try:
                end = base
                for _, header in records.entries():
                    end = header.next_offset
            finally:
                records.close()
            log.info("found %s from an interrupted swap, recoverable by renaming", swap)
            low = base if low is None else min(low, base)
            high = end if high is None else max(high, end)
        if low is not None and high is not None:
            for name in os.listdir(self.dir):
                offset = offset_from_file_name(name)
                if not name.endswith(SWAP_SUFFIX) and offset is not None and low <= offset < high:
                    _remove(os.path.join(self.dir, name), "replaced by a swap segment")
        for swap in swap_files:
            log.info("completing interrupted swap: %s", swap)
            os.rename(swap, swap[: -len(SWAP_SUFFIX)])

    def _load_segment_files(self) -> None:
        names = set(os.listdir(self.dir))
        for name in sorted(names):
            offset = offset_from_file_name(name)
            if offset is None:
                continue
            for suffix in SEGMENT_SUFFIXES[1:]:
                if name.endswith(suffix) and f"{offset:020d}{LOG_SUFFIX}" not in names:
                    _remove(os.path.join(self.dir, name), "index without a log segment")
        for name in sorted(n for n in names if n.endswith(LOG_SUFFIX)):
            base = offset_from_file_name(name)
            if base is None:
                continue
            index_missing = any(
                not os.path.exists(segment_path(self.dir, base, suffix)) for suffix in SEGMENT_SUFFIXES[1:3]
            )
            segment = LogSegment.open(self.dir, base, self.config, rolling_jitter_ms=self.config.random_segment_jitter())
            self.segments.add(segment)
            try:
                if index_missing:
                    raise CorruptIndexError(f"index files of segment {segment.log.path} are missing")
                segment.sanity_check()
            except CorruptIndexError as exc:
                log.warning("rebuilding the indexes of %s: %s", segment.log.path, exc)
                self.had_clean_shutdown = False
                self.recovery_point = min(self.recovery_point, base)

    def _rebuild_epochs_from_headers(self) -> None:
        for segment in self.segments:
            for _, header in segment.log.entries():
                epoch = header.partition_leader_epoch
                if header.magic >= 2 and epoch >= 0:
                    latest = self.epochs.latest_epoch()
                    if latest is None or epoch > latest:
                        self.epochs.assign(epoch, header.base_offset)

    def _recover_log(self) -> None:
        unflushed = self.segments.from_offset(self.recovery_point)
        if not unflushed:
            return
        rebuild_producer_state(
            self.producers, self.segments, self.log_start_offset, unflushed[0].base_offset, self.now_ms
        )
        for i, segment in enumerate(unflushed):
            log.info("recovering unflushed segment %s", segment.log.path)
            truncated = segment.recover(self.producers, self.epochs)
            if truncated > 0:
                for later in unflushed[i + 1 :]:
                    log.warning("deleting segment %s after the invalid data in %s", later.log.path, segment.log.path)
                    self.segments.remove(later.base_offset)
                    later.delete_files()
                break
        self.producers.take_snapshot()
