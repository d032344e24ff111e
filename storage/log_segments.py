"""LogSegments: a partition's segments ordered by base offset, with floor/higher lookups."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from storage.log_segment import LogSegment


class LogSegments:
    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, LogSegment] = {}

    def __len__(self) -> int:
        return len(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter([self._by_base[b] for b in self._bases])

    def add(self, segment: LogSegment) -> None:
        if segment.base_offset not in self._by_base:
            bisect.insort(self._bases, segment.base_offset)
        self._by_base[segment.base_offset] = segment

    def remove(self, base_offset: int) -> None:
        if self._by_base.pop(base_offset, None) is not None:
            self._bases.remove(base_offset)

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    @property
    def first(self) -> LogSegment | None:
        return self._by_base[self._bases[0]] if self._bases else None

    @property
    def active(self) -> LogSegment:
        return self._by_base[self._bases[-1]]

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._by_base[self._bases[i - 1]] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._bases, base_offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def values_between(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Kafka's LogSegments.values(from, to): the segment holding ``from_offset`` (or the first
        one) up to, not including, the first whose base offset is ``to_offset`` or more."""
        if from_offset >= to_offset:
            return []
        floor = self.floor(from_offset)
        start = floor.base_offset if floor else -1
        return [self._by_base[b] for b in self._bases if start <= b < to_offset]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """Segments that may hold offsets >= ``offset`` (the floor segment and every later one)."""
        floor = self.floor(offset)
        start = floor.base_offset if floor else -1
        return [self._by_base[b] for b in self._bases if b >= start]

    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._by_base.values())
