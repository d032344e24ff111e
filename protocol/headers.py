"""Request and response headers.

``parse_request_header`` is on every request's path: it unpacks the fixed part
with one precompiled Struct, reads the client id, and skips the header's tagged
fields (v2), so the broker can route a request before decoding its body.
Header versions follow ``protocol.api_keys`` (including Kafka's two exceptions).
"""

from __future__ import annotations

import struct
from typing import Union

from protocol.api_keys import FIRST_FLEXIBLE_VERSION, ApiKey, request_header_version
from protocol.exceptions import ProtocolError
from protocol.wire import read_uvarint

Buffer = Union[bytes, bytearray, memoryview]

_FIXED = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_FIXED_V0 = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_CONTROLLED_SHUTDOWN = int(ApiKey.CONTROLLED_SHUTDOWN)


class RequestHeader:
    """A parsed request header; ``header_size`` is where the request body starts."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_size", "header_version")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                 header_size: int, header_version: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_size = header_size
        self.header_version = header_version

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{a}={getattr(self, a)!r}" for a in self.__slots__)
        return f"RequestHeader({fields})"


def _skip_tagged_fields(buf: Buffer, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("truncated tagged field in header")
    return pos


def parse_request_header(buf: Buffer) -> RequestHeader:
    """Parse the header at the start of a request frame (without its size prefix)."""
    try:
        if len(buf) >= 10:
            api_key, api_version, correlation_id, length = _FIXED.unpack_from(buf, 0)
        else:
            api_key, api_version, correlation_id = _FIXED_V0.unpack_from(buf, 0)
            length = None
        if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
            return RequestHeader(api_key, api_version, correlation_id, None, 8, 0)
        flexible_min = FIRST_FLEXIBLE_VERSION.get(api_key)
        if flexible_min is None:
            raise ProtocolError(f"unknown api key {api_key}")
        header_version = 2 if api_version >= flexible_min else 1
        if length is None:
            raise ProtocolError("truncated request header: no client id length")
        pos = 10
        client_id = None
        if length >= 0:
            end = pos + length
            if end > len(buf):
                raise ProtocolError(f"request header client id of {length} bytes exceeds the frame")
            client_id = str(buf[pos:end], "utf-8")
            pos = end
        elif length != -1:
            raise ProtocolError(f"request header client id has invalid length {length}")
        if header_version == 2:
            if pos < len(buf) and buf[pos] == 0:  # no tagged fields: the usual case
                pos += 1
            else:
                pos = _skip_tagged_fields(buf, pos)
        return RequestHeader(api_key, api_version, correlation_id, client_id, pos, header_version)
    except struct.error as exc:
        raise ProtocolError(f"truncated request header ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"request header client id is not valid UTF-8 ({exc})") from None


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """The request header for this api key and version (header version chosen by Kafka's rules)."""
    header_version = request_header_version(api_key, api_version)
    fixed = _FIXED_V0.pack(api_key, api_version, correlation_id)
    if header_version == 0:
        return fixed
    if client_id is None:
        body = fixed + _INT16.pack(-1)
    else:
        raw = client_id.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ProtocolError(f"client id of {len(raw)} bytes is too long")
        body = fixed + _INT16.pack(len(raw)) + raw
    return body + b"\x00" if header_version == 2 else body


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    if header_version == 0:
        return _INT32.pack(correlation_id)
    if header_version == 1:
        return _INT32.pack(correlation_id) + b"\x00"
    raise ProtocolError(f"unknown response header version {header_version}")


def parse_response_header(buf: Buffer, header_version: int) -> tuple[int, int]:
    """Return (correlation id, offset of the response body)."""
    try:
        (correlation_id,) = _INT32.unpack_from(buf, 0)
    except struct.error:
        raise ProtocolError("truncated response header") from None
    if header_version == 0:
        return correlation_id, 4
    return correlation_id, _skip_tagged_fields(buf, 4)
