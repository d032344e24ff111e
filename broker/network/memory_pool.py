"""MemoryPool: queued.max.request.bytes, the bytes requests may hold before the broker stops reading.

Kafka's SimpleMemoryPool in its non-strict mode: requests take bytes while any are left, so the
pool may end up below zero; once it has none, processors stop reading from connections, and are
called back when finished requests free their bytes. A request holds its bytes from the moment it
is read until its response is ready. (Kafka allocates per request after reading its size; here a
read may bring in several requests, all taken together.)
"""

from __future__ import annotations

from collections.abc import Callable


class MemoryPool:
    def __init__(self, size_bytes: int) -> None:
        if size_bytes < 1:
            raise ValueError("a memory pool needs at least one byte")
        self.size_bytes = size_bytes
        self.available = size_bytes
        self._waiters: list[Callable[[], None]] = []

    @property
    def is_out_of_memory(self) -> bool:
        return self.available <= 0

    def allocate(self, size: int) -> None:
        """Account for ``size`` bytes just read (the caller reads only while bytes are left)."""
        self.available -= size

    def release(self, size: int) -> None:
        was_out = self.is_out_of_memory
        self.available += size
        if was_out and not self.is_out_of_memory and self._waiters:
            waiters, self._waiters = self._waiters, []
            for resume in waiters:
                resume()

    def wait_for_memory(self, resume: Callable[[], None]) -> None:
        """Call ``resume`` once when the pool has bytes again (synchronously; it must not raise)."""
        self._waiters.append(resume)
