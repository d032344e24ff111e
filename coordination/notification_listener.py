"""ZkNodeChangeNotificationListener: a queue of sequential notification znodes (Kafka's).

Writers add persistent-sequential children ``<prefix><seq>`` under a path; every broker watches
the path, handles each notification newer than the last one it processed (all of them after a
restart: they only say "re-read X"), and purges notifications older than 15 minutes. Used for
dynamic config changes and for the ACL authorizer's change queues.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from coordination.errors import CoordinationError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_event_thread import ZkEventThread

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000


def notification_sequence(child: str, prefix: str) -> int | None:
    if not child.startswith(prefix):
        return None
    digits = child[len(prefix):]
    return int(digits) if digits.isdigit() else None


class ZkNodeChangeNotificationListener:
    """Calls ``handle(path, data)`` for each new notification, on a thread of its own."""

    def __init__(
        self,
        zk_client: KafkaZkClient,
        path: str,
        prefix: str,
        handle: Callable[[str, bytes | None], None],
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.zk = zk_client
        self.path = path
        self.prefix = prefix
        self._handle = handle
        self._expiry_ms = expiry_ms
        self._clock_ms = clock_ms
        self.last_executed_change = -1
        self._events = ZkEventThread(f"change-listener-{path}", self.process_notifications,
                                     f"change notifications under {path}")

    def start(self) -> None:
        self.zk.zk.register_child_handler(self.path, lambda _path: self._events.wake())
        self._events.start()
        self._events.wake()

    def close(self) -> None:
        self.zk.zk.unregister_child_handler(self.path)
        self._events.close()

    def process_notifications(self) -> None:
        children = self.zk.get_children(self.path, watch=True)
        numbered = sorted((seq, child) for child in children
                          if (seq := notification_sequence(child, self.prefix)) is not None)
        for seq, child in numbered:
            if seq <= self.last_executed_change:
                continue
            path = f"{self.path}/{child}"
            data, stat = self.zk.zk.get_data(path)
            if stat is not None:
                try:
                    self._handle(path, data)
                except CoordinationError:
                    raise
                except Exception:
                    log.exception("handling change notification %s failed", path)
            self.last_executed_change = seq
        self._purge_obsolete(numbered)

    def _purge_obsolete(self, numbered: list[tuple[int, str]]) -> None:
        now = self._clock_ms()
        for _, child in numbered:
            path = f"{self.path}/{child}"
            stat = self.zk.zk.exists(path)
            if stat is not None and now - stat.ctime > self._expiry_ms:
                try:
                    self.zk.zk.delete(path)
                except (NoNodeError, CoordinationError) as exc:  # gone already, or ZooKeeper trouble
                    log.debug("could not purge %s: %r", path, exc)
