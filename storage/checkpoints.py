"""Kafka's text checkpoint files: ``<version>\\n<count>\\n<entry>...``, written atomically.

Writes go to ``<name>.tmp``, are fsynced, renamed over the real file, and the directory is
fsynced so the rename survives a crash; writes of one file are serialised (as Kafka's
CheckpointFile does with its lock), since two threads may write the same file (the periodic
checkpoint task and a partition deletion) and would otherwise rename each other's .tmp away.
A missing or 0-byte file reads as empty, as in Kafka.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable

from storage.errors import CorruptCheckpointError

CURRENT_VERSION = 0


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _PathLock:
    """A lock for one path, alive while a writer holds it (a weak dict keeps no lock for every
    producer snapshot ever written)."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()


_write_locks: weakref.WeakValueDictionary[str, _PathLock] = weakref.WeakValueDictionary()
_write_locks_guard = threading.Lock()


def _write_lock(path: str) -> _PathLock:
    key = os.path.abspath(path)
    with _write_locks_guard:
        lock = _write_locks.get(key)
        if lock is None:
            lock = _write_locks[key] = _PathLock()
        return lock


def write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    path_lock = _write_lock(path)
    with path_lock.lock:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))


class CheckpointFile:
    """Lines of whitespace-separated fields under a version/count header."""

    fields_per_line = 0

    def __init__(self, path: str, create: bool = True) -> None:
        self.path = path
        if create and not os.path.exists(path):
            open(path, "ab").close()

    def write_lines(self, lines: Iterable[tuple[object, ...]]) -> None:
        rows = [" ".join(str(field) for field in line) for line in lines]
        text = f"{CURRENT_VERSION}\n{len(rows)}\n" + "".join(row + "\n" for row in rows)
        write_atomically(self.path, text.encode())

    def read_lines(self) -> list[list[str]]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise CorruptCheckpointError(f"checkpoint file {self.path} is not UTF-8 text") from exc
        if not lines:
            return []
        if lines[0].strip() != str(CURRENT_VERSION):
            raise CorruptCheckpointError(f"unrecognised version {lines[0]!r} in checkpoint file {self.path}")
        try:
            count = int(lines[1])
        except (IndexError, ValueError) as exc:
            raise CorruptCheckpointError(f"missing or malformed entry count in checkpoint file {self.path}") from exc
        rows = [line.split() for line in lines[2:] if line.strip()]
        if count != len(rows):
            raise CorruptCheckpointError(
                f"checkpoint file {self.path} declares {count} entries but holds {len(rows)}"
            )
        for number, row in enumerate(rows, start=3):
            if len(row) != self.fields_per_line:
                raise CorruptCheckpointError(f"malformed line {number} in checkpoint file {self.path}: {' '.join(row)!r}")
        return rows


def _int(value: str, path: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise CorruptCheckpointError(f"malformed number {value!r} in checkpoint file {path}") from exc


class OffsetCheckpointFile(CheckpointFile):
    """``<topic> <partition> <offset>`` lines (recovery point, high watermark, log start, cleaner)."""

    fields_per_line = 3

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        self.write_lines((topic, partition, offset) for (topic, partition), offset in offsets.items())

    def read(self) -> dict[tuple[str, int], int]:
        return {(t, _int(p, self.path)): _int(o, self.path) for t, p, o in self.read_lines()}


class LeaderEpochCheckpointFile(CheckpointFile):
    """``<epoch> <start offset>`` lines of a partition's leader-epoch cache."""

    fields_per_line = 2

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self.write_lines(entries)

    def read(self) -> list[tuple[int, int]]:
        return [(_int(e, self.path), _int(o, self.path)) for e, o in self.read_lines()]
