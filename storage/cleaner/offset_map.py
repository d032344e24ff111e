"""OffsetMap: key -> latest offset of the dirty section (Kafka's SkimpyOffsetMap role).

Kafka stores 16-byte MD5 hashes plus an 8-byte offset in a fixed buffer, so its capacity is
``memory // 24`` slots. The same capacity bounds this map (a cleaner thread gets the same
number of keys per round for the same ``log.cleaner.dedupe.buffer.size``), but entries are
keyed by the key bytes in a dict: no hashing per record in Python and no collisions.
"""

from __future__ import annotations

from bisect import bisect_left

HASH_SIZE = 16  # MD5, Kafka's log.cleaner hash algorithm
BYTES_PER_ENTRY = HASH_SIZE + 8


class OffsetMap:
    __slots__ = ("slots", "entries", "latest_offset", "start_offset", "_sorted")

    def __init__(self, memory: int) -> None:
        self.slots = max(0, memory) // BYTES_PER_ENTRY
        self.entries: dict[bytes, int] = {}
        self.latest_offset = -1
        self.start_offset = 0  # the map covers the keyed records in [start_offset, latest_offset]
        self._sorted: list[int] | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, key: bytes, offset: int) -> None:
        self.entries[key] = offset
        self.latest_offset = offset
        self._sorted = None

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 when absent."""
        return self.entries.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        """Move past offsets that hold no key (gaps, control batches, aborted data)."""
        self.latest_offset = offset

    def clear(self) -> None:
        self.entries.clear()
        self.latest_offset = -1
        self._sorted = None

    def any_latest_between(self, low: int, high: int) -> bool:
        """Whether some key's latest offset lies in [low, high]. A mapped batch without one keeps
        no record, so the cleaner drops it unread. (Call once the map is complete: the sorted
        offsets are taken at the first call.)"""
        if self._sorted is None:
            self._sorted = sorted(self.entries.values())
        i = bisect_left(self._sorted, low)
        return i < len(self._sorted) and self._sorted[i] <= high

    @property
    def utilization(self) -> float:
        return len(self.entries) / self.slots if self.slots else 0.0
