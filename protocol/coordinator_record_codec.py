"""Reading and writing the fields of internal-topic records (``__consumer_offsets``, ``__transaction_state``).

Their keys and values are Kafka "data" messages prefixed by an int16 version and encoded with the
protocol's primitive types (classic or, at flexible versions, compact strings/arrays and tagged
fields). Both record modules (``consumer_offsets_records``, ``transaction_log_records``) build on
these helpers; every short or malformed read becomes a ``ProtocolError``.
"""

from __future__ import annotations

import struct
from typing import Optional

from protocol.exceptions import ProtocolError
from protocol.wire import read_uvarint, uvarint_size, write_uvarint

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")


class RecordReader:
    """A cursor over one key or value; every short read becomes a ProtocolError."""

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _take(self, size: int) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.buf):
            raise ProtocolError(f"{self.what} is truncated at byte {start} (needs {size} more)")
        self.pos = start + size
        return start

    def int8(self) -> int:
        return INT8.unpack_from(self.buf, self._take(1))[0]

    def int16(self) -> int:
        return INT16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return INT32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return INT64.unpack_from(self.buf, self._take(8))[0]

    def _length(self, compact: bool) -> int:
        if compact:
            value, self.pos = self._uvarint()
            return value - 1
        return self.int16()

    def array_length(self, compact: bool) -> int:
        if compact:
            value, self.pos = self._uvarint()
            return value - 1
        return self.int32()

    def _uvarint(self) -> tuple[int, int]:
        try:
            return read_uvarint(self.buf, self.pos)
        except ProtocolError as exc:
            raise ProtocolError(f"{self.what}: {exc}") from exc

    def string(self, compact: bool, nullable: bool = False) -> Optional[str]:
        length = self._length(compact)
        if length < 0:
            if nullable:
                return None
            raise ProtocolError(f"{self.what} has a null string where none is allowed (byte {self.pos})")
        start = self._take(length)
        try:
            return self.buf[start : start + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.what} has a string that is not UTF-8 at byte {start}") from exc

    def bytes_(self, compact: bool) -> bytes:
        length = self.array_length(compact)
        if length < 0:
            raise ProtocolError(f"{self.what} has null bytes where none are allowed (byte {self.pos})")
        start = self._take(length)
        return bytes(self.buf[start : start + length])

    def skip_tagged_fields(self) -> None:
        count, self.pos = self._uvarint()
        for _ in range(count):
            _tag, self.pos = self._uvarint()
            size, self.pos = self._uvarint()
            self._take(size)


def encode_uvarint(value: int) -> bytes:
    out = bytearray(uvarint_size(value))
    write_uvarint(out, 0, value)
    return bytes(out)


def encode_string(value: Optional[str], compact: bool) -> bytes:
    if value is None:
        return encode_uvarint(0) if compact else INT16.pack(-1)
    data = value.encode("utf-8")
    return (encode_uvarint(len(data) + 1) if compact else INT16.pack(len(data))) + data


def encode_bytes(value: bytes, compact: bool) -> bytes:
    return (encode_uvarint(len(value) + 1) if compact else INT32.pack(len(value))) + value


def encode_array_length(length: Optional[int], compact: bool) -> bytes:
    """An array's length prefix; None is a null array."""
    if length is None:
        return encode_uvarint(0) if compact else INT32.pack(-1)
    return encode_uvarint(length + 1) if compact else INT32.pack(length)
