"""SampledRate: Kafka's Rate over a SampledStat, the measure every quota is checked against.

Values go into samples of ``window_s`` seconds (a sample starts at its first record); samples
older than ``window_num`` windows are dropped; the rate is their sum divided by the time since
the oldest sample started, counted as at least ``window_num - 1`` windows (so a burst right after
a quiet period is not read as an enormous rate).
"""

from __future__ import annotations

from collections import deque


class SampledRate:
    def __init__(self, window_num: int = 11, window_s: float = 1.0) -> None:
        self.window_num = window_num
        self.window_s = window_s
        self._samples: deque[list[float]] = deque()  # [sample start, sum]
        self.last_record = 0.0

    def record(self, value: float, now: float) -> None:
        if not self._samples or now - self._samples[-1][0] >= self.window_s:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += value
        self.last_record = now
        self._purge(now)

    def window_size(self, now: float) -> float:
        """Seconds the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now)
        elapsed = now - self._samples[0][0] if self._samples else 0.0
        return max(elapsed, (self.window_num - 1) * self.window_s)

    def rate(self, now: float) -> float:
        size = self.window_size(now)
        return sum(total for _, total in self._samples) / size

    def _purge(self, now: float) -> None:
        while self._samples and now - self._samples[0][0] >= self.window_num * self.window_s:
            self._samples.popleft()
