"""Histogram: Kafka's Yammer histograms (count, and quantiles of recent samples) cheap enough for
hot paths.

Kafka's histograms keep an exponentially decaying reservoir of 1028 samples and report the 50th,
75th, 95th, 98th, 99th and 99.9th percentiles of it. Here the reservoir is the last 1028 samples
(a ``deque`` with ``maxlen``: one C-level append per update, no lock, no random draw, no heap), and
the quantiles are computed only when someone reads them, with Yammer's interpolation
(``Snapshot.getValue``). Like Kafka's, a reservoir that gets few updates keeps old samples; unlike
it, recent samples are not weighted more within the window.

One writer per histogram: an append is atomic under the GIL, so a reader on another thread
sees a consistent window. ``count`` and ``total`` are plain ints: callers update them from a
single thread, or under their own lock where several threads write (``SynchronizedHistogram``).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Iterable, Sequence

RESERVOIR_SIZE = 1028  # Yammer's default reservoir size, which Kafka uses
# The percentile attributes of a Yammer histogram MBean, as jmx_exporter's rules turn them into
# ``quantile`` labels ("50thPercentile" -> "0.50", "999thPercentile" -> "0.999").
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))


def quantile(ordered: Sequence[float], q: float) -> float:
    """Yammer's Snapshot.getValue: linear interpolation at position q * (n + 1) of sorted values."""
    n = len(ordered)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return float(ordered[0])
    if pos >= n:
        return float(ordered[-1])
    lower = ordered[int(pos) - 1]
    upper = ordered[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)


def quantiles(values: Iterable[float]) -> list[tuple[str, float]]:
    """The six Kafka percentiles of ``values`` as (label, value)."""
    ordered = sorted(values)
    return [(label, quantile(ordered, q)) for label, q in QUANTILES]


class Histogram:
    """Count, sum and the last ``RESERVOIR_SIZE`` samples of one measurement (single writer)."""

    __slots__ = ("count", "total", "samples")

    def __init__(self, size: int = RESERVOIR_SIZE) -> None:
        self.count = 0
        self.total = 0.0
        self.samples: deque[float] = deque(maxlen=size)

    def update(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.samples.append(value)

    def quantiles(self) -> list[tuple[str, float]]:
        return quantiles(list(self.samples))


class SynchronizedHistogram(Histogram):
    """A Histogram several threads update (e.g. every caller of the ZooKeeper client)."""

    __slots__ = ("_lock",)

    def __init__(self, size: int = RESERVOIR_SIZE) -> None:
        super().__init__(size)
        self._lock = threading.Lock()

    def update(self, value: float) -> None:
        with self._lock:
            super().update(value)
