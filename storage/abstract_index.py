"""Shared machinery of .index and .timeindex: a memory-mapped array of fixed-size entries.

A writable index is preallocated to its maximum size (zero-filled) while its segment is
active and trimmed to ``entries * entry_size`` when the segment rolls; on open an existing
file's entry count is its length divided by the entry size, as in Kafka's AbstractIndex.
"""

from __future__ import annotations

import abc
import mmap
import os
import threading

from storage.errors import CorruptIndexError, IndexOffsetOverflowError
from storage.mapped_file import MappedFile

INT32_MAX = 0x7FFFFFFF


class AbstractIndex(abc.ABC):
    entry_size: int = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._lock = threading.RLock()
        self._mapping: MappedFile | None = None
        self._view: memoryview | None = None  # the mapping's bytes, read by the subclasses' entry structs
        newly_created = not os.path.exists(path)
        if newly_created and not writable:
            raise FileNotFoundError(path)
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        try:
            if newly_created:
                os.ftruncate(fd, self._round(max_index_size))
            length = os.fstat(fd).st_size
            self._map(fd, length)
        finally:
            os.close(fd)
        self._length = length
        self.max_entries = length // self.entry_size
        self.entries = 0 if newly_created else length // self.entry_size
        self._after_load()

    # --- hooks for subclasses --------------------------------------------------------------
    def _after_load(self) -> None:
        """Refresh cached last-entry state after the entry count changed."""

    @abc.abstractmethod
    def _key_at(self, slot: int, by_value: bool) -> int:
        """The offset (by_value False) or the searchable value of entry ``slot``."""

    # --- mapping ---------------------------------------------------------------------------
    def _round(self, size: int) -> int:
        return max(0, size) // self.entry_size * self.entry_size

    def _map(self, fd: int, length: int) -> None:
        if length == 0:
            return
        self._mapping = MappedFile(fd, length, self.writable)
        self._view = self._mapping.view
        if self.writable:
            # No read-around: the first write fault on a new, sparse index would otherwise fill
            # up to read_ahead_kb (8 MiB on some disks) of page cache with zero pages, 1-2 ms of
            # CPU per segment on the append path; entries are written in order, probed at random.
            self._mapping.advise(mmap.MADV_RANDOM)

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} is not representable relative to base offset {self.base_offset} in {self.path}"
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def resize(self, new_size: int) -> bool:
        """Set the file length (rounded to whole entries); returns whether it changed."""
        with self._lock:
            rounded = self._round(new_size)
            if rounded == self._length:
                return False
            self._close_map()
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, rounded)
                self._map(fd, rounded)
            finally:
                os.close(fd)
            self._length = rounded
            self.max_entries = rounded // self.entry_size
            self.entries = min(self.entries, self.max_entries)
            return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def flush(self) -> None:
        with self._lock:
            if self._mapping is not None and self.writable:
                self._mapping.flush()

    def _close_map(self) -> None:
        if self._mapping is not None:
            self._view = None
            self._mapping.close()
            self._mapping = None

    def close(self) -> None:
        with self._lock:
            if self.writable and self._length != self.size_in_bytes and os.path.exists(self.path):
                self.trim_to_valid_size()
            self._close_map()

    def close_handler(self) -> None:
        """Unmap without trimming (the file is about to be renamed or deleted)."""
        with self._lock:
            self._close_map()

    def rename_to(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete_if_exists(self) -> None:
        self.close_handler()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def reset(self) -> None:
        """Remove every entry and re-extend to the maximum size."""
        with self._lock:
            self.truncate_to_entries(0)
            self.resize(self.max_index_size)

    def truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            self.entries = entries
            self._after_load()

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset``."""
        with self._lock:
            slot = self.largest_lower_bound_slot(offset, by_value=False)
            if slot < 0:
                new_entries = 0
            elif self._key_at(slot, False) == offset:
                new_entries = slot
            else:
                new_entries = slot + 1
            self.truncate_to_entries(new_entries)

    def largest_lower_bound_slot(self, target: int, by_value: bool) -> int:
        """Slot of the last entry whose key is <= target, or -1 (binary search)."""
        n = self.entries
        if n == 0 or self._key_at(0, by_value) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._key_at(mid, by_value) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _check_length(self) -> None:
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {self._length}, not a multiple of entry size {self.entry_size}"
            )
