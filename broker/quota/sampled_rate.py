"""SampledRate: Kafka's Rate over a SampledStat, the measure every quota is checked against
(client and replication quotas, the connection creation rate).

Values go into samples of ``window_s`` seconds (a sample starts at its first record), at most
``window_num`` of them; samples older than ``window_num`` windows are dropped; the rate is their
sum divided by Kafka's ``Rate.windowSize``: the time since the oldest sample started, plus as many
windows as it lacks of ``window_num - 1`` full ones (so a burst right after a quiet period is not
read as an enormous rate).
"""

from __future__ import annotations

import math
from collections import deque


class SampledRate:
    def __init__(self, window_num: int = 11, window_s: float = 1.0) -> None:
        self.window_num = window_num
        self.window_s = window_s
        self._samples: deque[list[float]] = deque()  # [sample start, sum], oldest first
        self.last_record = 0.0

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        samples = self._samples
        if not samples or now - samples[-1][0] >= self.window_s:
            if len(samples) == self.window_num:
                samples.popleft()
            samples.append([now, 0.0])
        samples[-1][1] += value
        self.last_record = now

    def window_size(self, now: float) -> float:
        """Seconds the rate is measured over (Kafka's Rate.windowSize, at least a millisecond)."""
        self._purge(now)
        elapsed = now - self._samples[0][0] if self._samples else 0.0
        full = int(elapsed // self.window_s)
        if full < self.window_num - 1:
            elapsed += (self.window_num - 1 - full) * self.window_s
        return max(elapsed, 0.001)

    def rate(self, now: float) -> float:
        size = self.window_size(now)
        return sum(total for _, total in self._samples) / size

    def throttle_s(self, bound: float, now: float) -> float:
        """Kafka's QuotaUtils.throttleTime: how long the rate needs to come back to ``bound``
        (0 within it; without end for a bound of 0)."""
        rate = self.rate(now)
        if rate <= bound:
            return 0.0
        if bound <= 0:
            return math.inf
        return (rate - bound) / bound * self.window_size(now)

    def _purge(self, now: float) -> None:
        expired = self.window_num * self.window_s
        while self._samples and now - self._samples[0][0] >= expired:
            self._samples.popleft()
