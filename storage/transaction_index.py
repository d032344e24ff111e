"""TransactionIndex (.txnindex): one 34-byte AbortedTxn entry per ABORT marker in the segment.

A plain append-only file with absolute offsets, created on first use; read_committed fetches
collect the aborted transactions overlapping the fetched range from it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from storage.errors import CorruptIndexError, InvalidOffsetError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, buf: bytes, pos: int = 0) -> AbortedTxn:
        version, producer_id, first, last, lso = _ENTRY.unpack_from(buf, pos)
        return cls(producer_id, first, last, lso, version)


class TransactionIndex:
    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._last_offset: int | None = None
        entries = self.all_aborted_txns()
        if entries:
            self._last_offset = entries[-1].last_offset

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"the last offset of appended transaction {txn} must exceed {self._last_offset} in {self.path}"
            )
        with open(self.path, "ab") as f:
            f.write(txn.encode())
        self._last_offset = txn.last_offset

    def flush(self) -> None:
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        usable = len(data) - len(data) % ENTRY_SIZE
        return [AbortedTxn.decode(data, pos) for pos in range(0, usable, ENTRY_SIZE)]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset); complete once an entry's last stable
        offset reaches the bound: every transaction aborted later started at or after that offset."""
        found = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker offset is >= ``offset``."""
        entries = self.all_aborted_txns()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries) and (not entries or os.path.getsize(self.path) % ENTRY_SIZE == 0):
            return
        with open(self.path, "r+b") as f:
            f.truncate(len(keep) * ENTRY_SIZE)
        self._last_offset = keep[-1].last_offset if keep else None

    def reset(self) -> None:
        self.delete_if_exists()

    def rename_to(self, path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path

    def delete_if_exists(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        self._last_offset = None

    def sanity_check(self) -> None:
        if not os.path.exists(self.path):
            return
        size = os.path.getsize(self.path)
        if size % ENTRY_SIZE:
            raise CorruptIndexError(f"transaction index {self.path} has length {size}, not a multiple of {ENTRY_SIZE}")
        for txn in self.all_aborted_txns():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"last offset of aborted transaction {txn} in {self.path} is below the segment base {self.start_offset}"
                )
