"""ZkEventThread: the thread a ZooKeeper watcher re-reads its znodes on.

Watch handlers run on the ZooKeeper client's own thread and must only say "re-read"; the reading
happens here, once per wake-up, in order. ZooKeeper trouble is logged and left to the next wake-up
(every handler is called again after a reconnect).
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from coordination.errors import CoordinationError

log = logging.getLogger(__name__)


class ZkEventThread:
    def __init__(self, name: str, process: Callable[[], None], what: str) -> None:
        """``process()`` runs at each ``wake()``; ``what`` names it in the log."""
        self._process = process
        self._what = what
        self._wakeups: queue.Queue[bool] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wakeups.put(True)

    def close(self) -> None:
        self._wakeups.put(False)
        if self._thread.is_alive():
            self._thread.join(10)

    def _run(self) -> None:
        while self._wakeups.get():
            try:
                self._process()
            except CoordinationError as exc:
                log.warning("%s not processed now (%s); will retry on the next event", self._what, exc)
