"""TimeIndex (.timeindex): (timestamp int64, relative offset int32) entries.

Entries are appended only when the timestamp grows, so a binary search by timestamp works;
the index counts as full one entry early because rolling forces in a final entry.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from storage.abstract_index import AbstractIndex
from storage.errors import CorruptIndexError, InvalidOffsetError

_ENTRY = struct.Struct(">qi")
_PACK_ENTRY = _ENTRY.pack_into
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    entry_size = 12

    def _after_load(self) -> None:
        self.last_entry = self.entry(self.entries - 1) if self.entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def _key_at(self, slot: int, by_value: bool) -> int:
        timestamp, relative = _ENTRY.unpack_from(self._view, slot * 12)
        return timestamp if by_value else self.base_offset + relative

    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    def entry(self, slot: int) -> TimestampOffset:
        if slot < 0 or slot >= self.entries:
            raise IndexError(f"slot {slot} out of range for {self.entries} entries in {self.path}")
        timestamp, relative = _ENTRY.unpack_from(self._view, slot * 12)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= target, or (-1, base offset)."""
        with self._lock:
            slot = self.largest_lower_bound_slot(target_timestamp, by_value=True)
            return TimestampOffset(NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        with self._lock:
            entries = self.entries
            if not skip_full_check and self.is_full():
                raise InvalidOffsetError(f"attempt to append to a full time index {self.path} ({entries} entries)")
            last = self.last_entry
            if entries and offset < last.offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} to slot {entries} no larger than the last "
                    f"offset appended ({last.offset}) to {self.path}"
                )
            if entries and timestamp < last.timestamp:
                raise InvalidOffsetError(
                    f"attempt to append timestamp {timestamp} to slot {entries} no larger than the last "
                    f"timestamp appended ({last.timestamp}) to {self.path}"
                )
            if timestamp > last.timestamp:
                if entries >= self.max_entries:
                    raise InvalidOffsetError(f"time index {self.path} has no room for a final entry")
                _PACK_ENTRY(self._view, entries * 12, timestamp, self.relative_offset(offset))
                self.entries = entries + 1
                self.last_entry = TimestampOffset(timestamp, offset)

    def sanity_check(self) -> None:
        self._check_length()
        if self.entries:
            first_timestamp = self.entry(0).timestamp
            if self.last_entry.timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: last timestamp {self.last_entry.timestamp} "
                    f"is below the first {first_timestamp}"
                )
            if self.last_entry.offset < self.base_offset:
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: last offset {self.last_entry.offset} "
                    f"is below the base offset {self.base_offset}"
                )
