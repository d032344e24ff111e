"""Test harness: an in-process SocketServer on a free port, on a uvloop loop in a background thread.

Tests talk to it with real blocking sockets from the test thread; the request handler is a
plain ``async def handle(request) -> Response | None`` running on the server's loop.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import uvloop

from broker.config import KafkaConfig
from broker.network.request_channel import Request, Response
from broker.network.request_handler import KafkaRequestHandlerPool, RequestHandler
from broker.network.socket_server import SocketServer
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.framing import decode_response, encode_request
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse

CLIENT_TIMEOUT_S = 20.0


class ServerThread:
    def __init__(self, handler: RequestHandler, overrides: dict[str, Any]) -> None:
        props = {"zookeeper.connect": "localhost:2181", "listeners": "PLAINTEXT://127.0.0.1:0",
                 "num.network.threads": "2", "num.io.threads": "4", **overrides}
        self.config = KafkaConfig(props)
        self.handler = handler
        self.loop = uvloop.new_event_loop()
        self.server = SocketServer(self.config)
        self.pool = KafkaRequestHandlerPool(self.server.request_channel, handler, self.config.num_io_threads)
        self._thread = threading.Thread(target=self.loop.run_forever, name="socket-server", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self.call(self._start).result(CLIENT_TIMEOUT_S)
        self.port = self.server.bound_port("PLAINTEXT")

    async def _start(self) -> None:
        await self.server.start()
        self.pool.start()

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` (sync or async) on the server loop; returns a concurrent Future."""
        async def run() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def stats(self) -> dict[str, int]:
        def read() -> dict[str, int]:
            s = self.server
            return {"connections": s.connection_count, "requests": s.requests_received, "writes": s.writes,
                    "queued": len(s.request_channel), "bytes_sent": s.bytes_sent}
        return self.call(read).result(CLIENT_TIMEOUT_S)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=CLIENT_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def stop(self) -> None:
        """Shut the server down and stop its loop (idempotent)."""
        if self.loop.is_closed():
            return

        async def stop() -> None:
            self.server.shutdown()
            await self.pool.shutdown()
        try:
            self.call(stop).result(CLIENT_TIMEOUT_S)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CLIENT_TIMEOUT_S)
            self.loop.close()


# --- client side --------------------------------------------------------------------------------

def api_versions_request(correlation_id: int, name: str = "test", version: int = 3) -> bytes:
    body = ApiVersionsRequest(client_software_name=name, client_software_version="1")
    return encode_request(body, ApiKey.API_VERSIONS, version, correlation_id, "client")


def raw_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("closed by the server")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def recv_api_versions(sock: socket.socket, version: int = 3) -> tuple[int, ApiVersionsResponse]:
    return decode_response(ApiKey.API_VERSIONS, version, recv_frame(sock))  # type: ignore[return-value]


def is_closed_by_server(sock: socket.socket) -> bool:
    """Blocks until the server closes the connection (True) or sends data (False)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


async def echo_api_versions(request: Request) -> Response:
    """Answers ApiVersions with throttle_time_ms = the request body's size (proves delivery)."""
    return Response.send(request, ApiVersionsResponse(error_code=Errors.NONE, throttle_time_ms=len(request.body_bytes)))


def echo_once_released(release: threading.Event) -> RequestHandler:
    """``echo_api_versions`` that keeps each request in its handler until ``release`` is set."""
    async def handle(request: Request) -> Response:
        while not release.is_set():
            await asyncio.sleep(0.005)
        return await echo_api_versions(request)
    return handle
