"""Size-prefixed request/response frames: header plus body.

The client side (controller-to-broker channel, tests) uses ``encode_request`` and
``decode_response``; the broker side uses ``decode_request`` and
``encode_response_parts`` (which keeps records sources as separate parts for
zero-copy sends).
"""

from __future__ import annotations

import struct
from typing import Any, Union

from protocol.api_keys import request_class, response_class, response_header_version
from protocol.exceptions import ProtocolError
from protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)
from protocol.messages import Message

Buffer = Union[bytes, bytearray, memoryview]

_SIZE = struct.Struct(">i")


def encode_request(body_obj: Message, api_key: int, version: int, correlation_id: int,
                   client_id: str | None) -> bytes:
    """A whole request frame, 4-byte size prefix included."""
    header = encode_request_header(api_key, version, correlation_id, client_id)
    body = body_obj.encode(version)
    return b"".join((_SIZE.pack(len(header) + len(body)), header, body))


def decode_request(frame: Buffer) -> tuple[RequestHeader, Message]:
    """Parse a request frame (without its size prefix) into header and body."""
    header = parse_request_header(frame)
    cls = request_class(header.api_key)
    return header, cls.decode(frame, header.api_version, header.header_size)


def decode_response(api_key: int, version: int, frame: Buffer) -> tuple[int, Message]:
    """Parse a response frame (without its size prefix): (correlation id, body)."""
    correlation_id, offset = parse_response_header(frame, response_header_version(api_key, version))
    body = response_class(api_key).decode(frame, version, offset)
    return correlation_id, body


def encode_response(body_obj: Message, api_key: int, version: int, correlation_id: int) -> bytes:
    """A whole response frame, 4-byte size prefix included."""
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    body = body_obj.encode(version)
    return b"".join((_SIZE.pack(len(header) + len(body)), header, body))


def encode_response_parts(body_obj: Message, api_key: int, version: int, correlation_id: int) -> list[Any]:
    """A response frame as parts: size prefix and header first, then ``encode_parts``."""
    return frame_response_parts(body_obj.encode_parts(version), api_key, version, correlation_id)


def frame_response_parts(parts: list[Any], api_key: int, version: int, correlation_id: int) -> list[Any]:
    """A response frame of a body already encoded as ``parts``: size prefix and header first."""
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    size = len(header) + sum(map(len, parts))
    if size > 0x7FFFFFFF:
        raise ProtocolError(f"response of {size} bytes is too large for one frame")
    return [_SIZE.pack(size) + header, *parts]
