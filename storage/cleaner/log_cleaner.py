"""LogCleaner: the ``log.cleaner.threads`` threads that compact ``cleanup.policy=compact`` logs.

Each thread repeatedly takes the dirtiest log from the LogCleanerManager, has its own
CleanerProcess clean it (a Cleaner with its own offset map, in a process of its own so that the
round's CPU work does not take the broker's interpreter lock), records the new first dirty
offset, then runs retention of the
compacted logs (for those, the cleaner threads and not the retention task delete old
segments, so the two never race); with nothing to clean it backs off ``log.cleaner.backoff.ms``.
An unexpected failure marks the partition uncleanable instead of killing the thread.
Reconfiguration (threads, buffers, rate, backoff) restarts the threads, as in Kafka.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from storage.cleaner.cleaner import CleanerStats
from storage.cleaner.cleaner_config import CleanerConfig
from storage.cleaner.cleaner_process import CleanerProcess
from storage.cleaner.log_cleaner_manager import (
    LogCleanerManager,
    LogToClean,
    PreCleanStats,
    TopicPartition,
    parent_dir,
)
from storage.cleaner.throttler import Throttler
from storage.errors import InvalidConfigError, LogCleaningAbortedError
from storage.log import Log
from storage.log_segment import now_ms

log = logging.getLogger("storage.cleaner.LogCleaner")


class _ThreadShutdown(Exception):
    """Raised inside a cleaning when its thread is asked to stop."""


class CleanerThread(threading.Thread):
    def __init__(self, thread_id: int, config: CleanerConfig, manager: LogCleanerManager, throttler: Throttler) -> None:
        super().__init__(name=f"kafka-log-cleaner-thread-{thread_id}", daemon=True)
        self.thread_id = thread_id
        self.config = config
        self.manager = manager
        self._stop_event = threading.Event()
        self.process = CleanerProcess(thread_id, config, throttler)
        self.last_pre_clean_stats = PreCleanStats()

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop_event.is_set():
            raise _ThreadShutdown()
        self.manager.check_cleaning_aborted(tp)

    def shutdown(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join()
        self.process.stop()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                cleaned = self._try_clean_filthiest_log()
            except _ThreadShutdown:
                return
            if not cleaned:
                self._stop_event.wait(self.config.backoff_ms / 1000)
            self.manager.maintain_uncleanable_partitions()

    def _try_clean_filthiest_log(self) -> bool:
        pre_clean = PreCleanStats()
        cleaned = False
        try:
            cleanable = self.manager.grab_filthiest_compacted_log(now_ms(), pre_clean)
        except Exception:  # noqa: BLE001 - a failing log must not stop the thread
            log.exception("Unexpected exception while choosing a log to clean")
            return False
        if cleanable is not None:
            self.last_pre_clean_stats = pre_clean
            self._clean_log(cleanable)
            cleaned = True
        deletable = self.manager.deletable_logs()
        try:
            for tp, tp_log in deletable:
                try:
                    tp_log.delete_old_segments()
                    tp_log.delete_pending_segments()
                except Exception:  # noqa: BLE001
                    log.exception("Unexpected exception while deleting old segments of %s; marking it uncleanable",
                                  tp_log.topic_partition)
                    self.manager.mark_partition_uncleanable(parent_dir(tp_log), tp)
        finally:
            self.manager.done_deleting([tp for tp, _ in deletable])
        return cleaned

    def _clean_log(self, cleanable: LogToClean) -> None:
        start = end = cleanable.first_dirty_offset
        try:
            tp = cleanable.topic_partition
            end, stats = self.process.clean(cleanable, now_ms(), lambda: self._check_done(tp))
            self._record_stats(cleanable.log.topic_partition, start, end, stats)
        except LogCleaningAbortedError:
            log.info("Cleaning of %s was aborted", cleanable.log.topic_partition)
        except _ThreadShutdown:
            raise
        except Exception:  # noqa: BLE001 - Kafka's LogCleaningException: the partition becomes uncleanable
            log.warning("Unexpected exception thrown when cleaning log %s. Marking its partition as uncleanable",
                        cleanable.log.topic_partition, exc_info=True)
            self.manager.mark_partition_uncleanable(parent_dir(cleanable.log), cleanable.topic_partition)
        finally:
            self.manager.done_cleaning(cleanable.topic_partition, parent_dir(cleanable.log), end)

    def _record_stats(self, name: str, start: int, end: int, stats: CleanerStats) -> None:
        """Kafka's summary of one cleaning, in its words (log-cleaner.log), for comparison."""
        mb = 1024 * 1024
        elapsed = max(stats.elapsed_secs, 1e-9)
        index_secs = max(stats.elapsed_index_secs, 1e-9)
        clean_secs = max(elapsed - stats.elapsed_index_secs, 1e-9)
        read_mb, written_mb = stats.bytes_read / mb, stats.bytes_written / mb
        lines = [
            f"Log cleaner thread {self.thread_id} cleaned log {name} (dirty section = [{start}, {end}])",
            f"{read_mb:,.1f} MB of log processed in {elapsed:,.1f} seconds ({read_mb / elapsed:,.1f} MB/sec).",
            f"Indexed {stats.map_bytes_read / mb:,.1f} MB in {stats.elapsed_index_secs:.1f} seconds "
            f"({stats.map_bytes_read / mb / index_secs:,.1f} Mb/sec, {100 * stats.elapsed_index_secs / elapsed:.1f}% "
            "of total time)",
            f"Buffer utilization: {100 * stats.buffer_utilization:.1f}%",
            f"Cleaned {read_mb:,.1f} MB in {clean_secs:.1f} seconds ({read_mb / clean_secs:,.1f} Mb/sec, "
            f"{100 * clean_secs / elapsed:.1f}% of total time)",
            f"Start size: {read_mb:,.1f} MB ({stats.messages_read:,} messages)",
            f"End size: {written_mb:,.1f} MB ({stats.messages_written:,} messages)",
            f"{100 * (1 - stats.bytes_written / max(stats.bytes_read, 1)):.1f}% size reduction "
            f"({100 * (1 - stats.messages_written / max(stats.messages_read, 1)):.1f}% fewer messages)",
        ]
        log.info("\n\t%s", "\n\t".join(lines))
        pre_clean = self.last_pre_clean_stats
        if pre_clean.delayed_partitions:
            log.info("\tCleanable partitions: %d, Delayed partitions: %d, max delay: %d", pre_clean.cleanable_partitions,
                     pre_clean.delayed_partitions, pre_clean.max_compaction_delay_ms)
        if stats.invalid_messages_read:
            log.warning("\tFound %d invalid messages during compaction.", stats.invalid_messages_read)


class LogCleaner:
    def __init__(self, config: CleanerConfig, log_dirs: Iterable[str], logs: Callable[[], dict[TopicPartition, Log]]) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs)
        self.throttler = Throttler(config.max_io_bytes_per_second)
        self.threads: list[CleanerThread] = []
        self._lock = threading.Lock()

    def startup(self) -> None:
        log.info("Starting the log cleaner")
        with self._lock:
            for i in range(self.config.num_threads):
                thread = CleanerThread(i, self.config, self.manager, self.throttler)
                self.threads.append(thread)
                thread.start()

    def shutdown(self) -> None:
        log.info("Shutting down the log cleaner.")
        with self._lock:
            for thread in self.threads:
                thread.shutdown()
            self.threads.clear()

    # --- dynamic reconfiguration ------------------------------------------------------------
    def validate_reconfiguration(self, new: CleanerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration (thread count changes are bounded)."""
        current = self.config.num_threads
        if new.num_threads < 1:
            raise InvalidConfigError("Log cleaner threads should be at least 1")
        if new.num_threads < current // 2:
            raise InvalidConfigError(
                f"Log cleaner threads cannot be reduced to less than half the current value {current}")
        if new.num_threads > current * 2:
            raise InvalidConfigError(
                f"Log cleaner threads cannot be increased to more than double the current value {current}")

    def reconfigure(self, new: CleanerConfig) -> None:
        """Take the new settings: the I/O rate at once, everything else by restarting the threads."""
        old, self.config = self.config, new
        if new.max_io_bytes_per_second != old.max_io_bytes_per_second:
            log.info("Updating logCleanerIoMaxBytesPerSecond: %s", new.max_io_bytes_per_second)
            self.throttler.update_desired_rate_per_sec(new.max_io_bytes_per_second)
        self.shutdown()
        self.startup()

    # --- partitions -------------------------------------------------------------------------
    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def update_checkpoints(self, data_dir: str, remove: TopicPartition | None = None) -> None:
        self.manager.update_checkpoints(data_dir, remove=remove)

    def alter_checkpoint_dir(self, tp: TopicPartition, source_dir: str, dest_dir: str) -> None:
        self.manager.alter_checkpoint_dir(tp, source_dir, dest_dir)

    def maybe_truncate_checkpoint(self, data_dir: str, tp: TopicPartition, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(data_dir, tp, offset)
