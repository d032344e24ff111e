"""Kafka's ControllerEventManager: one queue and one thread that processes controller events in
order, so controller state is never touched concurrently. ZooKeeper watch callbacks and API
handlers only enqueue."""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from coordination.errors import CoordinationError
from coordination.histogram import Histogram

log = logging.getLogger(__name__)


@dataclass
class ControllerEvent:
    """`name` identifies the handler; `args` its input; `future` (optional) gets the result."""

    name: str
    args: tuple[Any, ...] = ()
    future: Future[Any] | None = field(default=None, compare=False)
    enqueued_at: float = field(default=0.0, compare=False)  # monotonic seconds, set by put


_STOP = ControllerEvent("__stop__")


class ControllerEventManager:
    def __init__(self, process: Callable[[ControllerEvent], Any], name: str = "controller-event-thread") -> None:
        self._process = process
        self._queue: queue.Queue[ControllerEvent] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        # Kafka's EventQueueTimeMs: how long each event waited in the queue (the event thread writes it).
        self.queue_time_ms = Histogram()

    def start(self) -> None:
        self._thread.start()

    @property
    def idle(self) -> bool:
        """No event is waiting."""
        return self._queue.empty()

    @property
    def queue_size(self) -> int:
        """Kafka's EventQueueSize: events waiting."""
        return self._queue.qsize()

    def put(self, event: ControllerEvent) -> ControllerEvent:
        event.enqueued_at = time.monotonic()
        self._queue.put(event)
        return event

    def clear_and_put(self, event: ControllerEvent) -> ControllerEvent:
        """Drop pending events (their futures fail) and enqueue `event` (on session expiry)."""
        while True:
            try:
                dropped = self._queue.get_nowait()
            except queue.Empty:
                break
            if dropped is _STOP:
                self._queue.put(_STOP)
                break
            if dropped.future is not None and not dropped.future.done():
                dropped.future.set_exception(RuntimeError(f"controller event {dropped.name} dropped"))
        return self.put(event)

    def close(self) -> None:
        self._queue.put(_STOP)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is _STOP:
                return
            self.queue_time_ms.update((time.monotonic() - event.enqueued_at) * 1000)
            try:
                result = self._process(event)
            except CoordinationError as exc:  # an expected refusal (not controller, stale epoch...)
                log.info("controller event %s refused: %s", event.name, exc)
                if event.future is not None and not event.future.done():
                    event.future.set_exception(exc)
                continue
            except Exception as exc:  # one bad event must not stop the controller
                log.exception("controller event %s failed", event.name)
                if event.future is not None and not event.future.done():
                    event.future.set_exception(exc)
                continue
            if event.future is not None and not event.future.done():
                event.future.set_result(result)
