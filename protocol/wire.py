"""Primitive wire helpers shared by the generated codecs and the header parser.

The generated code inlines the one-byte cases of unsigned varints (almost every
length and tag count on the wire) and calls these only for longer values.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Union

from protocol.exceptions import ProtocolError, UnsupportedVersionError

Buffer = Union[bytes, bytearray, memoryview]


def uvarint_size(value: int) -> int:
    """Bytes taken by ``value`` as an unsigned varint."""
    if value < 0:
        raise ProtocolError(f"cannot encode negative value {value} as an unsigned varint")
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def write_uvarint(buf: bytearray, pos: int, value: int) -> int:
    """Write ``value`` at ``pos``; return the position after it."""
    if value < 0:
        raise ProtocolError(f"cannot encode negative value {value} as an unsigned varint")
    while value >= 0x80:
        buf[pos] = (value & 0x7F) | 0x80
        value >>= 7
        pos += 1
    buf[pos] = value
    return pos + 1


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a Kafka unsigned varint (at most 5 bytes, 32 bits) at ``pos``."""
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtocolError("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint is longer than 5 bytes")


def unknown_tags_size(unknown: Mapping[int, bytes]) -> int:
    """Bytes taken by preserved unknown tagged fields (tag, size, data each)."""
    return sum(uvarint_size(tag) + uvarint_size(len(data)) + len(data) for tag, data in unknown.items())


def write_unknown_tags(buf: bytearray, pos: int, unknown: Mapping[int, bytes], lo: int, hi: int) -> int:
    """Write the unknown tagged fields whose tag is in ``[lo, hi)``, in tag order."""
    for tag in sorted(unknown):
        if lo <= tag < hi:
            data = unknown[tag]
            pos = write_uvarint(buf, pos, tag)
            pos = write_uvarint(buf, pos, len(data))
            buf[pos:pos + len(data)] = data
            pos += len(data)
    return pos


def read_unknown_tags(buf: Buffer, pos: int, end: int, into: dict[int, bytes]) -> int:
    """Read a tagged-field section whose tags are all unknown into ``into``."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        stop = pos + size
        if stop > end:
            raise short_buffer("tagged field", size, end - pos)
        into[tag] = bytes(buf[pos:stop])
        pos = stop
    return pos


_SEGMENT_CACHE_LIMIT = 4096


def segment_packer(cache: dict[int, Any], template: tuple[tuple[str, str, str], ...], key: int) -> Any:
    """Build (and usually cache) the pack_into for one combination of array lengths.

    ``template`` lists (fixed-run format, count format, element format) per group; the
    6-bit fields of ``key`` are the array lengths in order.
    """
    fmt = [">"]
    shift = 0
    for run_fmt, count_fmt, element_fmt in template:
        fmt.append(run_fmt)
        if count_fmt:
            fmt.append(f"{count_fmt}{(key >> shift) & 0x3F}{element_fmt}")
            shift += 6
    pack_into = struct.Struct("".join(fmt)).pack_into
    if len(cache) < _SEGMENT_CACHE_LIMIT:
        cache[key] = pack_into
    return pack_into


def short_buffer(what: str, need: int, have: int) -> ProtocolError:
    return ProtocolError(f"{what}: length {need} exceeds the {have} bytes remaining")


def bad_length(what: str, length: int) -> ProtocolError:
    return ProtocolError(f"{what}: invalid length {length}")


def tag_size_mismatch(what: str, declared: int, used: int) -> ProtocolError:
    return ProtocolError(f"tagged field {what}: declared size {declared} but the value took {used} bytes")


def dropped_field(what: str, version: int) -> UnsupportedVersionError:
    return UnsupportedVersionError(f"{what} is set but does not exist at version {version}")
