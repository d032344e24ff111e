"""Throttler: holds the cleaner threads to ``log.cleaner.io.max.bytes.per.second`` together.

Kafka's Throttler: bytes are counted over periods of at least ``check_interval_ms``; when a
period's rate is above the desired rate, the caller sleeps just long enough to bring it down.
One instance is shared by every cleaner thread, and the sleep happens under its lock, so the
rate is a total over all threads, as in Kafka.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Throttler:
    def __init__(
        self, desired_rate_per_sec: float, check_interval_ms: int = 300,
        clock: Callable[[], int] = time.monotonic_ns, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self.check_interval_ns = check_interval_ms * 1_000_000
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0

    def update_desired_rate_per_sec(self, rate: float) -> None:
        self.desired_rate_per_sec = rate

    def maybe_throttle(self, observed: float) -> None:
        rate = self.desired_rate_per_sec
        with self._lock:
            self._observed += observed
            elapsed_ns = self._clock() - self._period_start
            if elapsed_ns <= self.check_interval_ns or self._observed <= 0:
                return
            if self._observed * 1e9 / elapsed_ns > rate:
                sleep_ms = round(self._observed / (rate / 1000) - elapsed_ns // 1_000_000)
                if sleep_ms > 0:
                    self._sleep(sleep_ms / 1000)
            self._period_start = self._clock()
            self._observed = 0.0
