"""LogManager: every partition log under ``log.dirs``, with startup recovery and periodic work.

At startup each log dir is checked (created if missing, a readable directory), locked
(``.lock``), its checkpoints are read (a garbage file is logged and treated as empty, so those
logs are fully recovered), and each partition directory is loaded; the clean-shutdown marker
skips recovery and is then removed. As in Kafka, a dir that fails any of this with an I/O
error is offline from the start instead of stopping the broker (only a broker left without
any dir stops). New partitions go to the live dir holding the fewest logs (Kafka's
nextLogDirs). A replica moving to another dir (AlterReplicaLogDirs) has a *future* log there,
``<topic>-<partition>.<uuid>-future``, which a restart loads again; once it caught up it
replaces the current log (``replace_current_with_future``), whose directory becomes
``...-delete`` and is removed after ``file.delete.delay.ms``.
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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from storage.checkpoints import OffsetCheckpointFile, fsync_dir, write_atomically
from storage.cleaner.cleaner_config import CleanerConfig
from storage.cleaner.log_cleaner import LogCleaner
from storage.cleaner.log_cleaner_manager import CLEANER_CHECKPOINT
from storage.errors import (
    CorruptCheckpointError,
    KafkaStorageError,
    LogDirNotFoundError,
    StorageError,
)
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import LogDirFailureChannel
from storage.log_files import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    parse_future_dir,
    parse_partition_dir,
    partition_dir_name,
    suffixed_dir_name,
)
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
DELETE_LOGS_CHECK_INTERVAL_MS = 1000

TopicPartition = tuple[str, int]


# Kafka's LogManager schedules these first after log.initial.task.delay.ms; the others (the high
# watermark checkpoint, producer expiration) after their own interval.
_AFTER_INITIAL_DELAY = frozenset({"retention", "flush", "recovery_point_checkpoint", "log_start_checkpoint",
                                  "delete_logs"})


def parent_dir(tp_log: Log) -> str:
    """The log dir a partition's log lives in."""
    return os.path.dirname(os.path.normpath(tp_log.dir))


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
            "delete_logs": DELETE_LOGS_CHECK_INTERVAL_MS,
        }
        self.producer_state_config = producer_state_config or ProducerStateManagerConfig()
        self.failure_channel = LogDirFailureChannel()
        # Kafka's log.initial.task.delay.ms: when retention, flushes and the log checkpoints first run.
        self.initial_task_delay_ms = initial_task_delay_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        # Logs being created outside the lock: (the dir chosen first, set once it is registered or failed).
        self._logs_in_creation: dict[TopicPartition, tuple[str, threading.Event]] = {}
        # Replicas being moved to another dir of this broker (Kafka's futureLogs).
        self._future_logs: dict[TopicPartition, Log] = {}
        # Where AlterReplicaLogDirs asked a replica this broker does not host yet to be created.
        self._preferred_log_dirs: dict[TopicPartition, str] = {}
        # Logs replaced by their future logs: (when, log), removed after file.delete.delay.ms.
        self._logs_to_be_deleted: list[tuple[int, Log]] = []
        self._lock = threading.RLock()
        self._lock_fds: dict[str, int] = {}
        self._scheduler: threading.Thread | None = None
        self._stop = threading.Event()
        self.cleaner_config = cleaner_config
        self.cleaner: LogCleaner | None = None

    # --- startup / shutdown ---------------------------------------------------------------
    def startup(self, broker_id: int | None = None, cluster_id: str | None = None,
                initial_offline_dirs: Iterable[str] = ()) -> None:
        """Check, lock and load every log dir; with a broker id, check/write each dir's meta.properties
        first. A dir failing with an I/O error (or named in ``initial_offline_dirs``: its
        meta.properties could not be read) goes offline; none left stops start-up."""
        try:
            self._create_and_validate_log_dirs({os.path.abspath(d) for d in initial_offline_dirs})
            for log_dir in self.live_log_dirs:
                self._lock_dir(log_dir)
            if broker_id is not None:
                ensure_meta_properties(self.live_log_dirs, broker_id, cluster_id,
                                       on_io_error=self._dir_failed_at_startup)
            for log_dir in self.live_log_dirs:
                try:
                    for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                                 CLEANER_CHECKPOINT):
                        OffsetCheckpointFile(os.path.join(log_dir, name))
                    self._load_dir(log_dir)
                except (OSError, KafkaStorageError) as exc:
                    self._dir_failed_at_startup(log_dir, exc)
            self._require_live_dir()
            if self.cleaner_config is not None and self.cleaner_config.enable_cleaner:
                self.cleaner = LogCleaner(self.cleaner_config, self.live_log_dirs, self.all_logs)
        except BaseException:
            self._release_locks()
            raise

    def _create_and_validate_log_dirs(self, initial_offline_dirs: set[str]) -> None:
        """Kafka's createAndValidateLogDirs: create missing dirs; one that cannot be created or read is offline."""
        if len({os.path.realpath(d) for d in self.log_dirs}) < len(self.log_dirs):
            raise StorageError(f"Duplicate log directory found: {', '.join(self.log_dirs)}")
        for log_dir in self.log_dirs:
            try:
                if log_dir in initial_offline_dirs:
                    raise OSError(f"Failed to load {log_dir} during broker startup")
                if not os.path.exists(log_dir):
                    log.info("Log directory %s not found, creating it.", log_dir)
                    os.makedirs(log_dir)
                    fsync_dir(os.path.dirname(log_dir))
                if not os.path.isdir(log_dir) or not os.access(log_dir, os.R_OK | os.X_OK):
                    raise OSError(f"{log_dir} is not a readable log directory.")
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(
                    log_dir, f"Failed to create or validate data directory {log_dir}", exc)
        if not self.live_log_dirs:
            message = (f"Shutdown broker because none of the specified log dirs from {', '.join(self.log_dirs)} "
                       "can be created or validated")
            log.error(message)
            raise StorageError(message)

    def _dir_failed_at_startup(self, log_dir: str, exc: BaseException) -> None:
        self.failure_channel.maybe_add_offline_log_dir(log_dir, f"Error while loading log dir {log_dir}", exc)
        self.handle_log_dir_failure(log_dir)

    def _require_live_dir(self) -> None:
        if not self.live_log_dirs:
            message = f"Shutdown broker because all log dirs in {', '.join(self.log_dirs)} have failed"
            log.error(message)
            raise StorageError(message)

    def _release_locks(self) -> None:
        """Unlock and delete each dir's ``.lock``, as Kafka's FileLock.destroy does."""
        for log_dir in list(self._lock_fds):
            self._release_lock(log_dir)

    def _release_lock(self, log_dir: str) -> None:
        fd = self._lock_fds.pop(log_dir, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(os.path.join(log_dir, LOCK_FILE))
        os.close(fd)

    def _lock_dir(self, log_dir: str) -> None:
        try:
            fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(
                log_dir, f"Disk error while locking directory {log_dir}", exc)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"failed to acquire lock on {log_dir}: another process is using it") from exc
        self._lock_fds[log_dir] = fd

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
            future = name.endswith(FUTURE_DIR_SUFFIX)
            tp = parse_future_dir(name) if future else parse_partition_dir(name)
            if tp is None:
                continue
            log.info("loading %slog %s from %s (clean shutdown: %s)", "future " if future else "", name, log_dir, clean)
            loaded = Log(
                path, self.config_for(tp[0]), topic_partition=partition_dir_name(*tp),
                log_start_offset=log_starts.get(tp, 0), recovery_point=recovery_points.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0), had_clean_shutdown=clean,
                producer_state_config=self.producer_state_config, failure_channel=self.failure_channel,
            )
            with self._lock:
                if future:
                    if tp in self._future_logs:
                        raise StorageError(f"Duplicate log directories found: {path}, {self._future_logs[tp].dir}")
                    self._future_logs[tp] = loaded
                elif tp in self._logs:
                    raise StorageError(
                        f"Duplicate log directories for {name} are found in both {path} and {self._logs[tp].dir}. "
                        "It is likely because log directory failure happened while broker was replacing current "
                        "replica with future replica. Recover broker from this failure by manually deleting one of "
                        "the two directories for this partition. It is recommended to delete the partition in the "
                        "log directory that is known to have failed recently.")
                else:
                    self._add_log(tp, loaded, log_dir)
        if clean:
            os.remove(marker)
        self.checkpoint_log_dir(log_dir)

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker per dir."""
        self.stop_scheduler()
        with self._lock:
            for tp_log in [*self._logs.values(), *self._future_logs.values()]:
                tp_log.close()
            self.delete_logs(force=True)
            for log_dir in self.live_log_dirs:
                self.checkpoint_log_dir(log_dir)
                dir_clean = all(l.recovery_point >= l.log_end_offset for l in self._logs_in(log_dir).values())
                if dir_clean:
                    body = json.dumps({"version": 0, "brokerEpoch": ZK_MODE_BROKER_EPOCH}, separators=(",", ":"))
                    try:
                        write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), body.encode())
                    except OSError as exc:  # the dir failed meanwhile: the next start recovers its logs
                        log.error("Disk error while writing the clean shutdown marker in %s: %s", log_dir, exc)
                else:
                    log.warning("not marking %s as cleanly shut down: a log found corrupt data", log_dir)
            self._logs.clear()
            self._log_dir_of.clear()
            self._future_logs.clear()
            self._release_locks()

    # --- log dir failures -----------------------------------------------------------------
    @property
    def live_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    @property
    def offline_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if self.failure_channel.is_offline(d)]

    def is_log_dir_online(self, log_dir: str) -> bool:
        """Kafka's isLogDirOnline: LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``."""
        if log_dir not in self.log_dirs:
            raise LogDirNotFoundError(f"Log dir {log_dir} is not found in the config.")
        return not self.failure_channel.is_offline(log_dir)

    def handle_log_dir_failure(self, log_dir: str) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Stop serving the logs of a failed dir (Kafka's LogManager.handleLogDirFailure): they are
        dropped, their files left as they are for recovery; returns their partitions (current logs,
        future logs)."""
        with self._lock:  # logs are closed (their locks taken) only once it is released
            dropped = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
            futures = [tp for tp, l in self._future_logs.items() if parent_dir(l) == log_dir]
            closing = [self._logs.pop(tp) for tp in dropped] + [self._future_logs.pop(tp) for tp in futures]
            for tp in dropped:
                self._log_dir_of.pop(tp)
            self._release_lock(log_dir)
        if self.cleaner is not None:
            for tp in dropped:
                self.cleaner.abort_cleaning(tp)
        for tp_log in closing:
            _close_quietly(tp_log)
        log.warning("Logs for partitions %s are offline and logs for future partitions %s are offline due to "
                    "failure on log directory %s", sorted(dropped), sorted(futures), log_dir)
        return dropped, futures

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
            cleaner.maybe_truncate_checkpoint(parent_dir(tp_log), tp, tp_log.active_segment.base_offset)
        finally:
            cleaner.resume_cleaning([tp])

    def config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self.topic_configs.get(topic, {}), self.default_config)

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> None:
        """Replace a topic's overrides and apply them to its open logs (future logs too)."""
        with self._lock:
            self.topic_configs[topic] = dict(overrides)
            config = self.config_for(topic)
            for (t, _), tp_log in [*self._logs.items(), *self._future_logs.items()]:
                if t == topic:
                    tp_log.config = config

    def get_log(self, topic: str, partition: int, future: bool = False) -> Log | None:
        with self._lock:
            return (self._future_logs if future else self._logs).get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def all_future_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._future_logs)

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        with self._lock:
            return self._log_dir_of.get((topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, overrides: Mapping[str, Any] | None = None, topic_id: uuid.UUID | None = None,
        *, is_new: bool = True,
    ) -> Log:
        """The partition's log; created if absent in its preferred dir (AlterReplicaLogDirs) or else
        the live dir holding the fewest logs. As Kafka's getOrCreateLog, a replica that should exist
        already (``is_new`` False) is not created empty while a dir is offline: it may be there.

        Logs of different partitions are created concurrently (the files and fsyncs of one new log
        take milliseconds, a topic of 10,000 partitions waited for them one after the other); a
        second caller for the same partition waits for the first one's log."""
        tp = (topic, partition)
        with self._lock:
            if overrides is not None:
                self.topic_configs[topic] = dict(overrides)
            existing = self._logs.get(tp)
            if existing is not None:
                if topic_id is not None and existing.topic_id != topic_id:
                    self._check_topic_id(existing.dir, topic_id)
                    existing.topic_id = topic_id
                return existing
            if not is_new and self.offline_log_dirs:
                raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directories "
                                        f"{','.join(self.offline_log_dirs)} are offline")
            in_creation = self._logs_in_creation.get(tp)
            if in_creation is None:
                preferred = self._preferred_log_dirs.get(tp)
                candidates = [preferred] if preferred is not None else self.next_log_dirs()
                self._logs_in_creation[tp] = (candidates[0] if candidates else "", threading.Event())
        if in_creation is not None:
            in_creation[1].wait()
            return self.get_or_create_log(topic, partition, overrides, topic_id, is_new=is_new)
        try:
            created = self._create_log(tp, candidates, partition_dir_name(topic, partition), topic_id)
            with self._lock:
                log_dir = parent_dir(created)
                if self.failure_channel.is_offline(log_dir):  # failed while the log was being created
                    _close_quietly(created)
                    raise KafkaStorageError(f"Log directory {log_dir} went offline while creating {topic}-{partition}")
                self._add_log(tp, created, log_dir)
                self._preferred_log_dirs.pop(tp, None)
        finally:
            with self._lock:
                self._logs_in_creation.pop(tp)[1].set()
        log.info("Created log for partition %s-%d in %s", topic, partition, created.dir)
        return created

    def next_log_dirs(self) -> list[str]:
        """Kafka's nextLogDirs: the live dirs by how many logs (current and future) each holds,
        fewest first; ties in ``log.dirs`` order (as Kafka orders them for up to four dirs)."""
        with self._lock:
            live = self.live_log_dirs
            if len(live) < 2:  # once per new log: counting 10,000 logs each time made creation quadratic
                return live
            counts = Counter(self._log_dir_of.values())
            counts.update(parent_dir(tp_log) for tp_log in self._future_logs.values())
            counts.update(log_dir for log_dir, _ in self._logs_in_creation.values())
            return sorted(live, key=counts.__getitem__)

    def _create_log(self, tp: TopicPartition, candidates: list[str], name: str, topic_id: uuid.UUID | None) -> Log:
        """A new log named ``name`` in the first candidate dir where its directory can be made
        (Kafka's createLogDirectory: an I/O error there takes that dir offline)."""
        for log_dir in candidates:
            if self.failure_channel.is_offline(log_dir):
                continue
            path = os.path.join(log_dir, name)
            try:
                os.makedirs(path, exist_ok=True)
                fsync_dir(log_dir)
                if topic_id is not None:
                    write_partition_metadata(path, topic_id)
                created = Log(
                    path, self.config_for(tp[0]), topic_partition=partition_dir_name(*tp),
                    had_clean_shutdown=True, producer_state_config=self.producer_state_config,
                    failure_channel=self.failure_channel,
                )
                created.topic_id = topic_id
                return created
            except OSError as exc:
                message = f"Error while creating log for {name} in dir {log_dir}"
                log.warning("%s: %s", message, exc)
                self.failure_channel.maybe_add_offline_log_dir(log_dir, message, exc)
        raise KafkaStorageError(f"No log directories available. Tried {', '.join(candidates)}")

    def _check_topic_id(self, path: str, topic_id: uuid.UUID) -> None:
        stored = read_partition_metadata(path)
        if stored is None:
            write_partition_metadata(path, topic_id)
        elif stored != topic_id:
            raise InconsistentMetadataError(f"topic id {topic_id} does not match {stored} stored in {path}")

    def delete_log(self, topic: str, partition: int, future: bool = False) -> None:
        """Remove a partition's log (or its future log): stop its cleaning, rename its dir to
        ``<name>.<uuid>-delete`` and delete it."""
        tp = (topic, partition)
        if not future and self.cleaner is not None and tp in self._logs:
            self.cleaner.abort_cleaning(tp)
        with self._lock:
            if future:
                tp_log = self._future_logs.pop(tp, None)
                log_dir = None if tp_log is None else parent_dir(tp_log)
            else:
                tp_log = self._logs.pop(tp, None)
                log_dir = self._log_dir_of.pop(tp, None)
            if tp_log is None or log_dir is None:
                return
            for segment in tp_log.segments:
                segment.close()
            target = os.path.join(log_dir, suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX))
            os.rename(tp_log.dir, target)
            fsync_dir(log_dir)
        self.checkpoint_log_dir(log_dir)
        if not future and self.cleaner is not None:
            self.cleaner.update_checkpoints(log_dir, remove=tp)
        shutil.rmtree(target, ignore_errors=True)

    # --- moving a replica between log dirs (AlterReplicaLogDirs) ---------------------------
    def maybe_update_preferred_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Remember where the replica should be created, unless its log or future log is there already."""
        with self._lock:
            tp = (topic, partition)
            future = self._future_logs.get(tp)
            if self._log_dir_of.get(tp) != log_dir and (future is None or parent_dir(future) != log_dir):
                self._preferred_log_dirs[tp] = log_dir

    def get_or_create_future_log(self, topic: str, partition: int, topic_id: uuid.UUID | None) -> Log:
        """The partition's future log, created empty in its preferred dir if absent; never while a
        dir is offline (the future log might exist in it)."""
        with self._lock:
            tp = (topic, partition)
            existing = self._future_logs.get(tp)
            if existing is not None:
                return existing
            if self.offline_log_dirs:
                raise KafkaStorageError(f"Can not create the future log for {topic}-{partition} because log "
                                        f"directories {','.join(self.offline_log_dirs)} are offline")
            preferred = self._preferred_log_dirs.get(tp)
            if preferred is None or preferred == self._log_dir_of.get(tp):
                raise StorageError(f"Can not create the future log for {topic}-{partition} without a preferred "
                                   "log directory other than its current one")
            created = self._create_log(tp, [preferred], suffixed_dir_name(topic, partition, FUTURE_DIR_SUFFIX),
                                       topic_id)
            self._future_logs[tp] = created
            self._preferred_log_dirs.pop(tp, None)
            log.info("Created future log for partition %s-%d in %s", topic, partition, created.dir)
            return created

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Kafka's replaceCurrentWithFutureLog, called with the current log's lock held once the
        future log has all of it: the future dir is renamed to the partition's name and becomes
        the current log (the old one forwards every call to it from now on), the old dir is
        renamed ``...-delete`` and removed after ``file.delete.delay.ms``. A crash between the
        two renames leaves the partition in two dirs, which start-up refuses, as Kafka's does."""
        tp = (topic, partition)
        with self._lock:  # no other log's lock, nor the cleaner's, is taken while it is held
            source, dest = self._logs.get(tp), self._future_logs.get(tp)
            if source is None:
                raise KafkaStorageError(f"The current replica for {topic}-{partition} is offline")
            if dest is None:
                raise KafkaStorageError(f"The future replica for {topic}-{partition} is offline")
            log.info("Attempting to replace current log %s with %s for %s-%d", source.dir, dest.dir, topic, partition)
            source_dir, dest_dir = self._log_dir_of[tp], parent_dir(dest)
            dest.rename_dir(partition_dir_name(topic, partition))
            dest.update_high_watermark(source.high_watermark)
            del self._future_logs[tp]
            self._add_log(tp, dest, dest_dir)
            source.moved_to = dest
            self._logs_to_be_deleted.append((now_ms(), source))
        # The swap is done: a failed dir from here on is reported, not raised (the move succeeded).
        if self.cleaner is not None:
            try:
                self.cleaner.alter_checkpoint_dir(tp, source_dir, dest_dir)
            except OSError as exc:
                log.error("Failed to move the cleaner checkpoint of %s-%d to %s: %s", topic, partition, dest_dir, exc)
            self.cleaner.resume_cleaning([tp])
        try:
            source.rename_dir(suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX))
        except KafkaStorageError as exc:  # its dir is offline now; the replaced log stays there
            log.error("Could not mark the replaced log %s for deletion: %s", source.dir, exc)
        self.checkpoint_log_dir(source_dir)
        log.info("The current replica is successfully replaced with the future replica for %s-%d", topic, partition)
        return dest

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        if self.cleaner is not None:
            self.cleaner.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        if self.cleaner is not None:
            self.cleaner.resume_cleaning([tp])

    def delete_logs(self, now: int | None = None, force: bool = False) -> int:
        """Remove the replaced logs whose ``file.delete.delay.ms`` has passed (all with ``force``);
        their files stay open until then for reads already under way."""
        due_before = (now_ms() if now is None else now) - self.default_config.file_delete_delay_ms
        with self._lock:
            due = [l for t, l in self._logs_to_be_deleted if force or t <= due_before]
            self._logs_to_be_deleted = [(t, l) for t, l in self._logs_to_be_deleted if l not in due]
        for tp_log in due:
            try:
                tp_log.delete()
                shutil.rmtree(tp_log.dir)
                log.info("Deleted log for partition %s in %s.", tp_log.topic_partition, tp_log.dir)
            except (OSError, StorageError) as exc:
                log.error("Exception while deleting %s in dir %s: %s", tp_log.topic_partition, parent_dir(tp_log), exc)
        return len(due)

    # --- periodic work --------------------------------------------------------------------
    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention: delete segments past retention.ms/retention.bytes/log start offset.

        As in Kafka, compacted logs are left to the cleaner threads (none without a cleaner),
        and the non-compacted ones have their cleaning paused meanwhile, so a log whose
        cleanup.policy just changed is never cleaned and retained at once. A future log is
        retained with its current log.
        """
        cleaner = self.cleaner
        if cleaner is not None:
            deletable = cleaner.manager.pause_cleaning_for_non_compacted_partitions()
        else:
            deletable = [(tp, l) for tp, l in self.all_logs().items() if not l.config.compact_enabled]
        futures = self.all_future_logs()
        total = 0
        try:
            for tp, tp_log in deletable:
                total += tp_log.delete_old_segments(now)
                if tp in futures:
                    total += futures[tp].delete_old_segments(now)
        finally:
            if cleaner is not None:
                cleaner.resume_cleaning([tp for tp, _ in deletable])
        return total

    def _every_log(self) -> list[Log]:
        with self._lock:
            return [*self._logs.values(), *self._future_logs.values()]

    def delete_pending_segments(self, now: int | None = None) -> int:
        return sum(tp_log.delete_pending_segments(now) for tp_log in self._every_log())

    def flush_dirty_logs(self, now: int | None = None) -> None:
        """flush.ms: fsync logs whose last flush is older than their configured interval."""
        current = now_ms() if now is None else now
        for tp_log in self._every_log():
            if current - tp_log.last_flush_ms >= tp_log.config.flush_ms:
                tp_log.flush()

    def remove_expired_producers(self, now: int | None = None) -> None:
        current = now_ms() if now is None else now
        for tp_log in self._every_log():
            tp_log.remove_expired_producers(current)

    def _logs_in(self, log_dir: str) -> dict[TopicPartition, Log]:
        """The current and future logs in a dir (a partition has at most one of them there)."""
        with self._lock:
            found = {tp: l for tp, l in self._logs.items() if self._log_dir_of[tp] == log_dir}
            found.update((tp, l) for tp, l in self._future_logs.items() if parent_dir(l) == log_dir)
            return found

    def _checkpoint(self, log_dir: str, name: str, value: Callable[[Log], int | None]) -> None:
        """Write one checkpoint file of a dir; an I/O error takes the dir offline (the other dirs'
        checkpoints are still written, as Kafka's checkpoint tasks go on after a failed dir)."""
        if self.failure_channel.is_offline(log_dir):
            return
        offsets = {tp: v for tp, l in self._logs_in(log_dir).items() if (v := value(l)) is not None}
        try:
            OffsetCheckpointFile(os.path.join(log_dir, name)).write(offsets)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(
                log_dir, f"Disk error while writing {name} in directory {log_dir}", exc)

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
            ("delete_logs", self.delete_logs),
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


def _close_quietly(tp_log: Log) -> None:
    """Close the log of a failed dir: its files may no longer flush (Kafka's closeHandlers)."""
    try:
        tp_log.close()
    except (OSError, StorageError) as exc:
        log.warning("closing %s in failed dir %s: %s", tp_log.topic_partition, parent_dir(tp_log), exc)


def _recovery_point(tp_log: Log) -> int:
    return tp_log.recovery_point


def _high_watermark(tp_log: Log) -> int:
    return tp_log.high_watermark


def _log_start_offset(tp_log: Log) -> int | None:
    """Only log start offsets above the first segment's base offset are recorded, as Kafka does."""
    first = tp_log.segments.first
    return tp_log.log_start_offset if first is not None and tp_log.log_start_offset > first.base_offset else None
