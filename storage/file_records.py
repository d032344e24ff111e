"""FileRecords: a segment's .log file, or a zero-copy slice of one.

The broker sends a slice with ``os.sendfile(sock, slice.fileno(), slice.position, len(slice))``
and falls back to ``read_bytes()``. Slices share the segment's descriptor; a deleted segment
keeps its descriptor open until file.delete.delay.ms has passed, as Kafka does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import LOG_OVERHEAD, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD, Buffer, read_batch_header
from protocol.records.log_entry import LogEntryHeader, read_log_entry, validate_log_entry

READ_CHUNK = 1 << 20  # bytes per pread while reading whole batches (recovery, dump)
HEADER_WINDOW = 4096  # bytes per pread while stepping through batch headers only (fetch, lookups)


class FileRecords:
    """A whole .log file (appendable) or a read-only window ``[position, position+length)``."""

    __slots__ = ("path", "_fd", "_start", "size", "_is_slice")
    size: int  # bytes in this view, len() of it: an attribute for the append path, a call fewer

    def __init__(self, path: str, fd: int, start: int, size: int, is_slice: bool) -> None:
        self.path = path
        self._fd = fd
        self._start = start
        self.size = size
        self._is_slice = is_slice

    @classmethod
    def open(cls, path: str, *, create: bool = True, preallocate_bytes: int = 0, read_only: bool = False) -> FileRecords:
        """Open a segment file; a preallocated file's logical size is 0 until written."""
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, 0o644)
        size = os.fstat(fd).st_size
        if preallocate_bytes and size == 0 and not read_only:
            os.posix_fallocate(fd, 0, preallocate_bytes)
        return cls(path, fd, 0, size, False)

    @classmethod
    def empty(cls) -> FileRecords:
        return cls("", -1, 0, 0, True)

    # --- the zero-copy view --------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        return self._fd

    @property
    def position(self) -> int:
        """Absolute file position of the first byte of this view."""
        return self._start

    def read_bytes(self) -> bytes:
        return self.read(0, self.size)

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` relative to this view."""
        size = max(0, min(size, self.size - position))
        if size == 0:
            return b""
        parts = []
        offset = self._start + position
        while size > 0:
            chunk = os.pread(self._fd, size, offset)
            if not chunk:
                break
            parts.append(chunk)
            offset += len(chunk)
            size -= len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def slice(self, position: int, size: int) -> FileRecords:
        size = max(0, min(size, self.size - position))
        return FileRecords(self.path, self._fd, self._start + position, size, True)

    # --- the writable file ---------------------------------------------------------------
    def append(self, buf: Buffer) -> int:
        """Write the whole buffer at the logical end (one pwrite in practice)."""
        total = len(buf)
        written = os.pwrite(self._fd, buf, self.size)
        if written < total:  # a short write: finish through a view, without copying
            view = memoryview(buf)
            while written < total:
                written += os.pwrite(self._fd, view[written:], self.size + written)
        self.size += written
        return written

    def flush(self) -> None:
        os.fsync(self._fd)

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the bytes removed."""
        if size > self.size or size < 0:
            raise ValueError(f"cannot truncate {self.path} of size {self.size} to {size}")
        removed = self.size - size
        os.ftruncate(self._fd, size)
        self.size = size
        return removed

    def trim_to_size(self) -> None:
        """Drop preallocated space past the logical end."""
        if os.fstat(self._fd).st_size != self.size:
            os.ftruncate(self._fd, self.size)

    def rename_to(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def close(self) -> None:
        if self._fd >= 0 and not self._is_slice:
            os.close(self._fd)
        self._fd = -1

    # --- stepping through entries ----------------------------------------------------------
    def entries(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, LogEntryHeader]]:
        """(position, header) of each complete entry in [start, end); stops at a partial tail."""
        for pos, header, _ in self._scan(start, end, with_data=False):
            yield pos, header

    def entries_with_data(
        self, start: int = 0, end: int | None = None, chunk: int = READ_CHUNK
    ) -> Iterator[tuple[int, LogEntryHeader, memoryview]]:
        """Like entries(), with each entry's bytes and its CRC checked (raises CorruptRecordError).

        The file is read ``chunk`` bytes at a time (more for a larger entry)."""
        return self._scan(start, end, with_data=True, chunk=chunk)

    def _scan(
        self, start: int, end: int | None, with_data: bool, chunk: int = HEADER_WINDOW
    ) -> Iterator[tuple[int, LogEntryHeader, memoryview]]:
        limit = self.size if end is None else min(end, self.size)
        pos = start
        buf = memoryview(b"")
        buf_start = start
        while limit - pos >= LOG_OVERHEAD:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = memoryview(self.read(pos, min(chunk, limit - pos)))
                buf_start, off = pos, 0
            length = int.from_bytes(buf[off + 8 : off + 12], "big", signed=True)
            if length < 0:
                raise CorruptRecordError(f"{self.path}: log entry at position {pos} has negative size {length}")
            size = length + LOG_OVERHEAD
            if pos + size > limit:
                return
            if size <= MAGIC_OFFSET:
                raise CorruptRecordError(f"{self.path}: log entry at position {pos} is too short ({size} bytes)")
            magic = buf[off + MAGIC_OFFSET]
            if off + size > len(buf) and (with_data or magic != 2):
                buf = memoryview(self.read(pos, max(size, min(chunk, limit - pos))))
                buf_start, off = pos, 0
            try:
                if with_data:
                    header = validate_log_entry(buf, off)
                elif magic == 2 and size >= RECORD_BATCH_OVERHEAD:
                    header = read_batch_header(buf, off, check_size=False)  # the window may end mid-batch
                else:
                    header = read_log_entry(buf, off)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{self.path}: {exc} (file position {pos})") from exc
            yield pos, header, (buf[off : off + size] if with_data else buf[:0])
            pos += size
