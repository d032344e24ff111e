"""Processor: owns a share of the connections (Kafka's network thread).

All processors run on the broker's event loop; they partition connections the way Kafka's
network threads do, so per-connection work (framing, header checks, idle expiry, response
writes) stays with one owner and counters stay per processor. Responses from handlers are
applied synchronously; writes are batched: a connection with a response ready is flushed
once per loop iteration, or a little later while its next pipelined request is still
waiting for a handler, so that their responses share one write.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time

from broker.network.api_version_manager import ApiVersionManager
from broker.network.channel_builder import ListenerSecurity
from broker.network.connection_quotas import ConnectionQuotas
from broker.network.kafka_channel import RECEIVE_BUFFER_SIZE, KafkaChannel
from broker.network.memory_pool import MemoryPool
from broker.network.request_channel import Request, RequestChannel, Response
from protocol.exceptions import ProtocolError
from protocol.headers import parse_request_header

log = logging.getLogger(__name__)

MAX_FLUSH_DEFERRALS = 2  # loop iterations a flush may wait for a pipelined request's handler


class Processor:
    def __init__(self, processor_id: int, loop: asyncio.AbstractEventLoop, request_channel: RequestChannel,
                 quotas: ConnectionQuotas, api_versions: ApiVersionManager, *, max_request_size: int,
                 connections_max_idle_ms: int, send_buffer_bytes: int, receive_buffer_bytes: int,
                 memory_pool: MemoryPool | None = None) -> None:
        self.id = processor_id
        self.loop = loop
        self.request_channel = request_channel
        self.quotas = quotas
        self.api_versions = api_versions
        self.max_request_size = max_request_size
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.memory_pool = memory_pool  # queued.max.request.bytes, shared by all processors; None: unbounded
        self.connections: dict[str, KafkaChannel] = {}
        self.receive_buffer = bytearray(RECEIVE_BUFFER_SIZE)  # shared: reads are handled one at a time
        # Counters (metrics hooks can read these later).
        self.requests_received = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        self.writes = 0
        self.connections_accepted = 0
        self.connections_closed = 0
        self._next_index = 0
        self._dirty: dict[KafkaChannel, int] = {}
        self._flush_scheduled = False
        self._idle_s = connections_max_idle_ms / 1000 if connections_max_idle_ms >= 0 else None
        self._idle_timer: asyncio.TimerHandle | None = None
        if self._idle_s is not None:
            self._schedule_idle_check()

    # --- connections --------------------------------------------------------------------------
    def accept(self, sock: socket.socket, client_ip: str, security: ListenerSecurity) -> KafkaChannel:
        """Take ownership of an accepted socket (its quota is already counted)."""
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self.send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        if self.receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        local = sock.getsockname()
        remote = sock.getpeername()
        connection_id = f"{local[0]}:{local[1]}-{remote[0]}:{remote[1]}-{self._next_index}"
        self._next_index += 1
        if security.ssl is not None:
            sock = security.ssl.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        channel = KafkaChannel(self, sock, connection_id, security, (remote[0], remote[1]), client_ip)
        self.connections[connection_id] = channel
        self.connections_accepted += 1
        channel.start()
        return channel

    def connection_closed(self, channel: KafkaChannel) -> None:
        if self.connections.pop(channel.connection_id, None) is None:
            return
        self._dirty.pop(channel, None)
        self.connections_closed += 1
        self.quotas.dec(channel.client_ip)

    def _schedule_idle_check(self) -> None:
        assert self._idle_s is not None
        interval = min(1.0, max(0.01, self._idle_s / 4))
        self._idle_timer = self.loop.call_later(interval, self._expire_idle)

    def _expire_idle(self) -> None:
        """Close connections idle for longer than connections.max.idle.ms.

        Each channel stamps its own last activity (one attribute store per read or write); this
        scan, a few times per idle period, costs less than keeping connections in LRU order on
        every request as Kafka's selector does."""
        assert self._idle_s is not None
        now = time.monotonic()
        deadline = now - self._idle_s
        for channel in [c for c in self.connections.values() if c.last_active <= deadline]:
            if channel.has_pending_work:
                channel.last_active = now
            else:
                channel.close(f"idle for more than {self._idle_s * 1000:.0f} ms", logging.DEBUG)
        self._schedule_idle_check()

    # --- requests -----------------------------------------------------------------------------
    def parse_request(self, channel: KafkaChannel, frame: bytearray) -> Request | None:
        """Header checks on the network thread, as Kafka does; None means the connection was closed."""
        try:
            header = parse_request_header(frame)
        except ProtocolError as exc:
            channel.close(f"cannot parse the request header: {exc}", logging.WARNING)
            return None
        if not self.api_versions.is_api_enabled(header.api_key, header.api_version):
            channel.close(f"received request api key {header.api_key} with version {header.api_version} "
                          f"which is not enabled", logging.WARNING)
            return None
        listener = channel.listener
        return Request(self, channel.connection_id, header, frame, listener.listener_name,
                       listener.security_protocol, channel.request_address)

    def enqueue_response(self, response: Response) -> None:
        channel = self.connections.get(response.request.connection_id)
        if channel is None:
            log.debug("Dropping %s: the connection is closed", response)
            metrics = self.request_channel.metrics
            if metrics is not None:  # Kafka still counts a request whose connection went away
                now = time.monotonic_ns()
                metrics.on_complete(response.request, now, now)
            return
        channel.complete(response)

    def request_parked(self, request: Request) -> None:
        """A handler parked ``request`` after its local work (see ``KafkaChannel.parked``)."""
        channel = self.connections.get(request.connection_id)
        if channel is not None:
            channel.parked(request)

    # --- writing ------------------------------------------------------------------------------
    def mark_dirty(self, channel: KafkaChannel) -> None:
        self._dirty[channel] = 0  # progress resets the deferral count
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush_dirty)

    def _flush_dirty(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, {}
        for channel, deferrals in dirty.items():
            if channel.closed:
                continue
            if deferrals < MAX_FLUSH_DEFERRALS and channel.can_defer_flush():
                self._dirty[channel] = deferrals + 1
            else:
                channel.flush()
        if self._dirty and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush_dirty)

    # --- shutdown -----------------------------------------------------------------------------
    def close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        for channel in list(self.connections.values()):
            channel.close("the broker is shutting down")
