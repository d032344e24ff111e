"""LogDirFailureChannel: log dirs that failed with an I/O error, as Kafka's of the same name.

The log layer reports a dir the first time an operation on it fails (``reports_io_errors`` wraps
the Log operations that write, like Kafka's ``maybeHandleIOException``) and raises
``KafkaStorageError`` to its caller, which answers KAFKA_STORAGE_ERROR. The broker's handler then
takes the dir offline: the replicas in it stop being served and the controller moves their
leadership, or, when no dir is left, the broker halts. The data already on disk stays as it was,
for recovery after a restart.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from storage.errors import KafkaStorageError

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: set[str] = set()
        self._lock = threading.Lock()
        self._handler: Callable[[str], None] | None = None

    def set_handler(self, handler: Callable[[str], None]) -> None:
        """``handler(log_dir)`` runs once per failed dir, on the thread that hit the error; the dirs
        that failed before (at start-up) are handed to it now, as Kafka's LogDirFailureHandler
        takes them from the channel's queue when it starts."""
        with self._lock:
            self._handler = handler
            failed = sorted(self._offline)
        for log_dir in failed:
            handler(log_dir)

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, exc: BaseException) -> None:
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline.add(log_dir)
        log.error("%s: %s", message, exc)
        if self._handler is not None:
            self._handler(log_dir)

    def is_offline(self, log_dir: str) -> bool:
        with self._lock:
            return log_dir in self._offline


def reports_io_errors(method: F) -> F:
    """For methods of ``Log``: an ``OSError`` (disk full, I/O error) reports the log's dir to its
    ``failure_channel`` and becomes ``KafkaStorageError``."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise storage_error(self, method.__name__, exc) from exc
    return wrapper  # type: ignore[return-value]


def storage_error(owner: Any, operation: str, exc: OSError) -> KafkaStorageError:
    """Report the dir of ``owner`` (a Log) to its ``failure_channel``; the error to raise instead
    of ``exc``. For hot paths that catch the ``OSError`` themselves rather than through the decorator."""
    log_dir = os.path.dirname(os.path.normpath(owner.dir))
    if owner.failure_channel is not None:
        owner.failure_channel.maybe_add_offline_log_dir(
            log_dir, f"Error in {operation} of {owner.topic_partition} in dir {log_dir}", exc)
    return KafkaStorageError(f"{operation} of {owner.topic_partition} failed in {log_dir}: {exc}")
