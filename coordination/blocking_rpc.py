"""Blocking request/response over a plain socket, for inter-broker RPCs outside the event loop.

The controller's send threads, a broker's ControlledShutdown call to the controller and the
test harness all send one request at a time and wait for its answer, as Kafka's
NetworkClient does for these paths; this is the one place that reads a response frame.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from protocol.framing import decode_response, encode_request


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed by the peer after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def read_response(sock: socket.socket, api_key: int, version: int) -> tuple[int, Any]:
    """Read one size-prefixed response frame; returns (correlation id, decoded body)."""
    size = int.from_bytes(recv_exactly(sock, 4), "big", signed=True)
    if size < 0:
        raise ConnectionError(f"invalid response size {size}")
    return decode_response(api_key, version, recv_exactly(sock, size))


# (host, port, timeout, client id) -> a socket ready for Kafka requests: the broker passes one that
# adds TLS and SASL for its inter-broker listener.
Connector = Callable[[str, int, float, str], socket.socket]


def plain_connect(host: str, port: int, timeout: float, client_id: str) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send_request(host: str, port: int, body: Any, api_key: int, version: int, client_id: str,
                 timeout: float, connect: Connector = plain_connect) -> Any:
    """One request on a fresh connection; returns the decoded response body."""
    with connect(host, port, timeout, client_id) as sock:
        sock.sendall(encode_request(body, api_key, version, 1, client_id))
        return read_response(sock, api_key, version)[1]
