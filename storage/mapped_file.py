"""A file region mapped into memory that holds no file descriptor, as the JVM's MappedByteBuffer.

Python's ``mmap`` (before 3.13's ``trackfd=False``) keeps a duplicate of the file's descriptor
for as long as the mapping lives, so every partition's two indexes would pin two descriptors on
top of its log: 10,000 partitions would need 30,000 where Kafka needs 10,000. The mapping is made
through libc instead; the caller closes its descriptor as soon as the mapping exists.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64)
for _name in ("munmap", "msync", "madvise"):
    getattr(_libc, _name).restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux's value; the mmap module does not export it


def _check(result: int) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


class MappedFile:
    """``length`` bytes of ``fd`` mapped shared; ``view`` is read-only unless ``writable``.

    Closing unmaps, so it refuses (BufferError, as ``mmap.close`` does) while any view taken
    from ``view`` is still alive: touching an unmapped page would crash the process.
    """

    __slots__ = ("_address", "_array", "length", "view")

    def __init__(self, fd: int, length: int, writable: bool) -> None:
        protection = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        address = _libc.mmap(None, length, protection, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            _check(-1)
        self._address: int = address
        self.length = length
        self._array = (ctypes.c_ubyte * length).from_address(address)
        view = memoryview(self._array).cast("B")
        self.view: memoryview = view if writable else view.toreadonly()

    def advise(self, advice: int) -> None:
        _check(_libc.madvise(self._address, self.length, advice))

    def flush(self) -> None:
        _check(_libc.msync(self._address, self.length, _MS_SYNC))

    def close(self) -> None:
        if not self._address:
            return
        self.view.release()  # BufferError while something holds a buffer of the view itself
        # Slices of the view share its buffer without counting as its exports: they keep the
        # array referenced (this attribute and getrefcount's argument are the other two).
        if sys.getrefcount(self._array) > 2:
            raise BufferError(f"cannot unmap {self.length} bytes while views of them are alive")
        _check(_libc.munmap(self._address, self.length))
        self._address = 0
