"""OffsetIndex (.index): sparse (relative offset int32, position int32) entries."""

from __future__ import annotations

import struct
from typing import NamedTuple

from storage.abstract_index import INT32_MAX, AbstractIndex
from storage.errors import CorruptIndexError, InvalidOffsetError

_ENTRY = struct.Struct(">ii")
_PACK_ENTRY = _ENTRY.pack_into


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    entry_size = 8

    def _after_load(self) -> None:
        self.last_offset = self.entry(self.entries - 1).offset if self.entries else self.base_offset

    def _key_at(self, slot: int, by_value: bool) -> int:
        return _ENTRY.unpack_from(self._view, slot * 8)[1 if by_value else 0] + (0 if by_value else self.base_offset)

    def entry(self, slot: int) -> OffsetPosition:
        if slot < 0 or slot >= self.entries:
            raise IndexError(f"slot {slot} out of range for {self.entries} entries in {self.path}")
        relative, position = _ENTRY.unpack_from(self._view, slot * 8)
        return OffsetPosition(self.base_offset + relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry at or below the target, or (base offset, 0)."""
        with self._lock:
            slot = self.largest_lower_bound_slot(target_offset, by_value=False)
            return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        """Add an entry. Appends come from one writer at a time (the owning Log's lock), and the
        entry is written before the count that publishes it, so this takes no index lock: readers
        see the index with or without the new entry, never half of it."""
        entries = self.entries
        if entries >= self.max_entries:  # is_full(), inlined: every large batch appends an entry
            raise InvalidOffsetError(f"attempt to append to a full index {self.path} ({entries} entries)")
        if entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} at position {entries} no larger than "
                f"the last offset appended ({self.last_offset}) to {self.path}"
            )
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            self.relative_offset(offset)  # raises IndexOffsetOverflowError
        _PACK_ENTRY(self._view, entries * 8, relative, position)
        self.last_offset = offset
        self.entries = entries + 1

    def sanity_check(self) -> None:
        self._check_length()
        if self.entries and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt index {self.path}: last offset {self.last_offset} is below the base offset {self.base_offset}"
            )
