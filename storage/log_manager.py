"""LogManager: every partition log under ``log.dirs``, with startup recovery and periodic work.

At startup each log dir is locked (``.lock``), its checkpoints are read (a garbage file is
logged and treated as empty, so those logs are fully recovered), and each partition
directory is loaded; the clean-shutdown marker skips recovery and is then removed.
Periodic work (retention, flush, checkpoints, delayed deletes) is plain methods the broker
calls, or a small background scheduler started with ``start_scheduler()``, which also starts
the LogCleaner when one is configured. As in Kafka, the LogManager pauses a log's cleaning
around truncations and retention of non-compacted logs, and aborts it before deletion.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from storage.checkpoints import OffsetCheckpointFile, fsync_dir, write_atomically
from storage.cleaner.cleaner_config import CleanerConfig
from storage.cleaner.log_cleaner import LogCleaner
from storage.cleaner.log_cleaner_manager import CLEANER_CHECKPOINT
from storage.errors import CorruptCheckpointError, KafkaStorageError, StorageError
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import LogDirFailureChannel
from storage.log_files import DELETE_DIR_SUFFIX, parse_partition_dir, partition_dir_name
from storage.log_segment import now_ms
from storage.meta_properties import (
    InconsistentMetadataError,
    ensure_meta_properties,
    read_partition_metadata,
    write_partition_metadata,
)
from storage.producer_state import ProducerStateManagerConfig

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
# A ZooKeeper-mode Kafka broker writes no epoch into .kafka_cleanshutdown (only KRaft brokers read it).
ZK_MODE_BROKER_EPOCH = -1
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

TopicPartition = tuple[str, int]


# Kafka's LogManager schedules these first after log.initial.task.delay.ms; the others (the high
# watermark checkpoint, producer expiration) after their own interval.
_AFTER_INITIAL_DELAY = frozenset({"retention", "flush", "recovery_point_checkpoint", "log_start_checkpoint"})


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig | None = None,
        *,
        topic_configs: Mapping[str, Mapping[str, Any]] | None = None,
        retention_check_interval_ms: int = 300000,
        flush_check_interval_ms: int = (1 << 63) - 1,
        flush_recovery_offset_checkpoint_interval_ms: int = 60000,
        flush_start_offset_checkpoint_interval_ms: int = 60000,
        high_watermark_checkpoint_interval_ms: int = 5000,
        producer_state_config: ProducerStateManagerConfig | None = None,
        producer_id_expiration_check_interval_ms: int = 600000,
        cleaner_config: CleanerConfig | None = None,
        initial_task_delay_ms: int = 30000,
    ) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.topic_configs = {t: dict(c) for t, c in (topic_configs or {}).items()}
        self.intervals = {
            "retention": retention_check_interval_ms,
            "flush": flush_check_interval_ms,
            "recovery_point_checkpoint": flush_recovery_offset_checkpoint_interval_ms,
            "log_start_checkpoint": flush_start_offset_checkpoint_interval_ms,
            "high_watermark_checkpoint": high_watermark_checkpoint_interval_ms,
            "producer_expiration": producer_id_expiration_check_interval_ms,
        }
        self.producer_state_config = producer_state_config or ProducerStateManagerConfig()
        self.failure_channel = LogDirFailureChannel()
        # Kafka's log.initial.task.delay.ms: when retention, flushes and the log checkpoints first run.
        self.initial_task_delay_ms = initial_task_delay_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._lock = threading.RLock()
        self._lock_fds: list[int] = []
        self._scheduler: threading.Thread | None = None
        self._stop = threading.Event()
        self.cleaner_config = cleaner_config
        self.cleaner: LogCleaner | None = None

    # --- startup / shutdown ---------------------------------------------------------------
    def startup(self, broker_id: int | None = None, cluster_id: str | None = None) -> None:
        """Lock and load every log dir; with a broker id, check/write each dir's meta.properties first."""
        try:
            for log_dir in self.log_dirs:
                os.makedirs(log_dir, exist_ok=True)
                self._lock_dir(log_dir)
            if broker_id is not None:
                ensure_meta_properties(self.log_dirs, broker_id, cluster_id)
            for log_dir in self.log_dirs:
                for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_CHECKPOINT):
                    OffsetCheckpointFile(os.path.join(log_dir, name))
                self._load_dir(log_dir)
            if self.cleaner_config is not None and self.cleaner_config.enable_cleaner:
                self.cleaner = LogCleaner(self.cleaner_config, self.log_dirs, self.all_logs)
        except BaseException:
            self._release_locks()
            raise

    def _release_locks(self) -> None:
        """Unlock and delete each dir's ``.lock``, as Kafka's FileLock.destroy does."""
        for log_dir, fd in zip(self.log_dirs, self._lock_fds):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(log_dir, LOCK_FILE))
            os.close(fd)
        self._lock_fds.clear()

    def _lock_dir(self, log_dir: str) -> None:
        fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"failed to acquire lock on {log_dir}: another process is using it") from exc
        self._lock_fds.append(fd)

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(log_dir, name)).read()
        except CorruptCheckpointError as exc:
            log.warning("error reading %s in %s, treating it as empty: %s", name, log_dir, exc)
            return {}

    def _load_dir(self, log_dir: str) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir, REPLICATION_CHECKPOINT)
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing partition directory %s left for deletion", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            log.info("loading log %s from %s (clean shutdown: %s)", name, log_dir, clean)
            loaded = Log(
                path, self.config_for(tp[0]), topic_partition=name,
                log_start_offset=log_starts.get(tp, 0), recovery_point=recovery_points.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0), had_clean_shutdown=clean,
                producer_state_config=self.producer_state_config, failure_channel=self.failure_channel,
            )
            with self._lock:
                if tp in self._logs:
                    raise StorageError(f"duplicate log directories for {name}: {self._log_dir_of[tp]} and {log_dir}")
                self._add_log(tp, loaded, log_dir)
        if clean:
            os.remove(marker)
        self.checkpoint_log_dir(log_dir)

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker per dir."""
        self.stop_scheduler()
        with self._lock:
            for tp_log in self._logs.values():
                tp_log.close()
            for log_dir in self.live_log_dirs:
                self.checkpoint_log_dir(log_dir)
                dir_clean = all(
                    l.recovery_point >= l.log_end_offset for tp, l in self._logs.items() if self._log_dir_of[tp] == log_dir
                )
                if dir_clean:
                    body = json.dumps({"version": 0, "brokerEpoch": ZK_MODE_BROKER_EPOCH}, separators=(",", ":"))
                    write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), body.encode())
                else:
                    log.warning("not marking %s as cleanly shut down: a log found corrupt data", log_dir)
            self._logs.clear()
            self._log_dir_of.clear()
            self._release_locks()

    # --- log dir failures -----------------------------------------------------------------
    @property
    def live_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Stop serving the logs of a failed dir (Kafka's LogManager.handleLogDirFailure): they are
        dropped, their files left as they are for recovery; returns their partitions."""
        with self._lock:
            dropped = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
            for tp in dropped:
                if self.cleaner is not None:
                    self.cleaner.abort_cleaning(tp)
                self._log_dir_of.pop(tp)
                tp_log = self._logs.pop(tp)
                try:
                    tp_log.close()
                except (OSError, StorageError) as exc:
                    log.warning("closing %s in failed dir %s: %s", tp_log.topic_partition, log_dir, exc)
        log.warning("Logs for partitions %s are offline in failed dir %s", sorted(dropped), log_dir)
        return dropped

    # --- logs -----------------------------------------------------------------------------
    def _add_log(self, tp: TopicPartition, tp_log: Log, log_dir: str) -> None:
        tp_log.truncation_guard = lambda: self._cleaning_paused(tp, tp_log)
        self._logs[tp] = tp_log
        self._log_dir_of[tp] = log_dir

    @contextmanager
    def _cleaning_paused(self, tp: TopicPartition, tp_log: Log) -> Iterator[None]:
        """Kafka's LogManager.truncateTo: abort and pause the log's cleaning while it is truncated,
        then keep its cleaner checkpoint within the log."""
        cleaner = self.cleaner
        if cleaner is None:
            yield
            return
        cleaner.abort_and_pause_cleaning(tp)
        try:
            yield
            cleaner.maybe_truncate_checkpoint(os.path.dirname(tp_log.dir), tp, tp_log.active_segment.base_offset)
        finally:
            cleaner.resume_cleaning([tp])

    def config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self.topic_configs.get(topic, {}), self.default_config)

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> None:
        """Replace a topic's overrides and apply them to its open logs."""
        with self._lock:
            self.topic_configs[topic] = dict(overrides)
            config = self.config_for(topic)
            for (t, _), tp_log in self._logs.items():
                if t == topic:
                    tp_log.config = config

    def get_log(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(
        self, topic: str, partition: int, overrides: Mapping[str, Any] | None = None, topic_id: uuid.UUID | None = None
    ) -> Log:
        """The partition's log, created in the log dir holding the fewest partitions if absent."""
        with self._lock:
            tp = (topic, partition)
            if overrides is not None:
                self.topic_configs[topic] = dict(overrides)
            existing = self._logs.get(tp)
            if existing is not None:
                if topic_id is not None:
                    self._check_topic_id(existing.dir, topic_id)
                return existing
            live = self.live_log_dirs
            if not live:
                raise KafkaStorageError(f"no log dir is online to create {topic}-{partition} in")
            counts = {d: 0 for d in live}
            for d in self._log_dir_of.values():
                counts[d] += 1
            log_dir = min(live, key=lambda d: counts[d])
            path = os.path.join(log_dir, partition_dir_name(topic, partition))
            os.makedirs(path, exist_ok=True)
            fsync_dir(log_dir)
            if topic_id is not None:
                write_partition_metadata(path, topic_id)
            created = Log(
                path, self.config_for(topic), topic_partition=os.path.basename(path),
                had_clean_shutdown=True, producer_state_config=self.producer_state_config,
                failure_channel=self.failure_channel,
            )
            self._add_log(tp, created, log_dir)
            return created

    def _check_topic_id(self, path: str, topic_id: uuid.UUID) -> None:
        stored = read_partition_metadata(path)
        if stored is None:
            write_partition_metadata(path, topic_id)
        elif stored != topic_id:
            raise InconsistentMetadataError(f"topic id {topic_id} does not match {stored} stored in {path}")

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove a partition: stop its cleaning, rename its dir to ``<name>.<uuid>-delete`` and delete it."""
        tp = (topic, partition)
        if self.cleaner is not None and tp in self._logs:
            self.cleaner.abort_cleaning(tp)
        with self._lock:
            tp_log = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
            if tp_log is None or log_dir is None:
                return
            for segment in tp_log.segments:
                segment.close()
            target = f"{tp_log.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            os.rename(tp_log.dir, target)
            fsync_dir(log_dir)
            self.checkpoint_log_dir(log_dir)
        if self.cleaner is not None:
            self.cleaner.update_checkpoints(log_dir, remove=tp)
        shutil.rmtree(target, ignore_errors=True)

    # --- periodic work --------------------------------------------------------------------
    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention: delete segments past retention.ms/retention.bytes/log start offset.

        As in Kafka, compacted logs are left to the cleaner threads (none without a cleaner),
        and the non-compacted ones have their cleaning paused meanwhile, so a log whose
        cleanup.policy just changed is never cleaned and retained at once.
        """
        cleaner = self.cleaner
        if cleaner is not None:
            deletable = cleaner.manager.pause_cleaning_for_non_compacted_partitions()
        else:
            deletable = [(tp, l) for tp, l in self.all_logs().items() if not l.config.compact_enabled]
        total = 0
        try:
            for _, tp_log in deletable:
                total += tp_log.delete_old_segments(now)
        finally:
            if cleaner is not None:
                cleaner.resume_cleaning([tp for tp, _ in deletable])
        return total

    def delete_pending_segments(self, now: int | None = None) -> int:
        return sum(tp_log.delete_pending_segments(now) for tp_log in self.all_logs().values())

    def flush_dirty_logs(self, now: int | None = None) -> None:
        """flush.ms: fsync logs whose last flush is older than their configured interval."""
        current = now_ms() if now is None else now
        for tp_log in self.all_logs().values():
            if current - tp_log.last_flush_ms >= tp_log.config.flush_ms:
                tp_log.flush()

    def remove_expired_producers(self, now: int | None = None) -> None:
        current = now_ms() if now is None else now
        for tp_log in self.all_logs().values():
            tp_log.remove_expired_producers(current)

    def _logs_in(self, log_dir: str) -> dict[TopicPartition, Log]:
        with self._lock:
            return {tp: l for tp, l in self._logs.items() if self._log_dir_of[tp] == log_dir}

    def _checkpoint(self, log_dir: str, name: str, value: Callable[[Log], int | None]) -> None:
        """Write one checkpoint file of a dir; an I/O error takes the dir offline."""
        offsets = {tp: v for tp, l in self._logs_in(log_dir).items() if (v := value(l)) is not None}
        try:
            OffsetCheckpointFile(os.path.join(log_dir, name)).write(offsets)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(log_dir, f"Error while writing {name} in dir {log_dir}", exc)
            raise KafkaStorageError(f"cannot write {name} in {log_dir}: {exc}") from exc

    def checkpoint_recovery_points(self) -> None:
        """Write recovery points, then drop producer snapshots that recovery can no longer need."""
        for log_dir in self.live_log_dirs:
            self._checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT, _recovery_point)
            for tp_log in self._logs_in(log_dir).values():
                tp_log.delete_snapshots_after_recovery_point_checkpoint()

    def checkpoint_log_start_offsets(self) -> None:
        for log_dir in self.live_log_dirs:
            self._checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT, _log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        for log_dir in self.live_log_dirs:
            self._checkpoint(log_dir, REPLICATION_CHECKPOINT, _high_watermark)

    def checkpoint_log_dir(self, log_dir: str) -> None:
        self._checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT, _recovery_point)
        self._checkpoint(log_dir, REPLICATION_CHECKPOINT, _high_watermark)
        self._checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT, _log_start_offset)

    # --- optional background scheduler ----------------------------------------------------
    def _tasks(self) -> list[tuple[str, Callable[[], object]]]:
        return [
            ("retention", self.cleanup_logs),
            ("retention", self.delete_pending_segments),
            ("flush", self.flush_dirty_logs),
            ("recovery_point_checkpoint", self.checkpoint_recovery_points),
            ("log_start_checkpoint", self.checkpoint_log_start_offsets),
            ("high_watermark_checkpoint", self.checkpoint_high_watermarks),
            ("producer_expiration", self.remove_expired_producers),
        ]

    def start_scheduler(self, tick_ms: int = 1000) -> None:
        if self._scheduler is not None:
            return
        if self.cleaner is not None:
            self.cleaner.startup()
        self._stop.clear()
        start = now_ms()
        next_run = {name: start + (self.initial_task_delay_ms if name in _AFTER_INITIAL_DELAY else interval)
                    for name, interval in self.intervals.items()}

        def run() -> None:
            while not self._stop.wait(tick_ms / 1000):
                current = now_ms()
                due = {name for name, at in next_run.items() if current >= at}
                for name, task in self._tasks():
                    if name in due:
                        try:
                            task()
                        except Exception:  # noqa: BLE001 - a failing task must not stop the others
                            log.exception("log manager task %s failed", name)
                for name in due:
                    next_run[name] = current + self.intervals[name]

        self._scheduler = threading.Thread(target=run, name="log-manager-scheduler", daemon=True)
        self._scheduler.start()

    def stop_scheduler(self) -> None:
        if self.cleaner is not None:
            self.cleaner.shutdown()
        if self._scheduler is not None:
            self._stop.set()
            self._scheduler.join()
            self._scheduler = None


def _recovery_point(tp_log: Log) -> int:
    return tp_log.recovery_point


def _high_watermark(tp_log: Log) -> int:
    return tp_log.high_watermark


def _log_start_offset(tp_log: Log) -> int | None:
    """Only log start offsets above the first segment's base offset are recorded, as Kafka does."""
    first = tp_log.segments.first
    return tp_log.log_start_offset if first is not None and tp_log.log_start_offset > first.base_offset else None
