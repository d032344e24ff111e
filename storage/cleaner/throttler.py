"""Throttler: holds the cleaner threads to ``log.cleaner.io.max.bytes.per.second`` together.

Kafka's Throttler: bytes are counted over periods of at least ``check_interval_ms``; when a
period's rate is above the desired rate, the caller sleeps just long enough to bring it down,
and a new period starts when that sleep ends. One instance is shared by every cleaner thread,
so the rate is a total over all threads, as in Kafka. Once ``share``d, its state and lock live
in shared memory and the cleaner processes of those threads share it too. Kafka sleeps holding the lock, so that the other threads wait for the same pause; here the
pause's end is part of the state and the others sleep until it outside the lock: a process
killed in its sleep leaves no lock held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any

_RATE, _PERIOD_START, _OBSERVED, _PAUSED_UNTIL = range(4)  # the cells of the state (clock in ns)
_SHARING = threading.Lock()


class Throttler:
    def __init__(
        self, desired_rate_per_sec: float, check_interval_ms: int = 300,
        clock: Callable[[], int] = time.monotonic_ns, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.check_interval_ns = check_interval_ms * 1_000_000
        self._clock = clock
        self._sleep = sleep
        start = float(clock())
        self._state: Any = [desired_rate_per_sec, start, 0.0, start]
        self._lock: Any = threading.Lock()
        self._shared = False

    def share(self, context: BaseContext) -> None:
        """Move the state into shared memory, for the processes spawned from now on (the first
        cleaner process does it: a broker that never cleans starts no multiprocessing machinery)."""
        with _SHARING:
            if not self._shared:
                self._state, self._lock = context.RawArray("d", list(self._state)), context.Lock()
                self._shared = True

    @property
    def desired_rate_per_sec(self) -> float:
        return self._state[_RATE]

    def update_desired_rate_per_sec(self, rate: float) -> None:
        self._state[_RATE] = rate

    def maybe_throttle(self, observed: float) -> None:
        state = self._state
        with self._lock:
            now = self._clock()
            pause_ns = state[_PAUSED_UNTIL] - now  # another caller's pause, still running
            state[_OBSERVED] += observed
            elapsed_ns = now - state[_PERIOD_START]
            if pause_ns <= 0 and elapsed_ns > self.check_interval_ns and state[_OBSERVED] > 0:
                rate = state[_RATE]
                if state[_OBSERVED] * 1e9 / elapsed_ns > rate:
                    pause_ns = max(0, round(state[_OBSERVED] / (rate / 1000) - elapsed_ns // 1_000_000)) * 1_000_000
                state[_PERIOD_START] = state[_PAUSED_UNTIL] = float(now + max(pause_ns, 0))
                state[_OBSERVED] = 0.0
        if pause_ns > 0:
            self._sleep(pause_ns / 1e9)
