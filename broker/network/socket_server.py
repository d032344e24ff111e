"""SocketServer: an Acceptor per listener feeding connections to the Processors.

Kafka's shape on one asyncio (uvloop) event loop: acceptors and processors watch raw
non-blocking sockets with add_reader/add_writer rather than asyncio transports, because
the processors need to pause reading per connection, write several responses with one
``sendmsg`` and hand file slices to ``os.sendfile`` on the socket, none of which a
transport allows. TLS runs through OpenSSL on the same sockets (``transport_layer``), which
keeps one code path for every listener; each listener's security is built by ``channel_builder``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket

from broker.config import EndPoint, KafkaConfig
from broker.network.api_version_manager import ApiVersionManager
from broker.network.channel_builder import ListenerSecurity, listener_security
from broker.network.connection_quotas import ConnectionQuotas, normalize_ip
from broker.network.memory_pool import MemoryPool
from broker.network.processor import Processor
from broker.network.request_channel import RequestChannel
from broker.security.credential_cache import CredentialCache

log = logging.getLogger(__name__)

ACCEPTS_PER_WAKEUP = 64  # bound the time one acceptor holds the loop under a connection storm


def _listen_socket(endpoint: EndPoint, backlog: int, receive_buffer_bytes: int) -> socket.socket:
    if endpoint.host:
        infos = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        # Like Java's InetAddress.getByName, prefer IPv4 ("localhost" -> 127.0.0.1).
        family, _, _, _, address = min(infos, key=lambda info: info[0] != socket.AF_INET)
        sock = socket.socket(family, socket.SOCK_STREAM)
    elif socket.has_dualstack_ipv6():
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        address = ("::", endpoint.port)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        address = ("0.0.0.0", endpoint.port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"Socket server failed to bind to {endpoint.connection_string()}: {exc.strerror}") from exc
    return sock


class Acceptor:
    """Accepts connections on one listener, checks quotas, assigns processors round-robin."""

    def __init__(self, security: ListenerSecurity, loop: asyncio.AbstractEventLoop, processors: list[Processor],
                 quotas: ConnectionQuotas, backlog: int, receive_buffer_bytes: int, protected: bool = False) -> None:
        endpoint = security.endpoint
        self.security = security
        self.endpoint = endpoint
        self.loop = loop
        self.quotas = quotas
        self.protected = protected  # the inter-broker listener of several: no broker-wide creation rate
        self._processors = itertools.cycle(processors)
        self.sock = _listen_socket(endpoint, backlog, receive_buffer_bytes)
        self.port: int = self.sock.getsockname()[1]
        self.connections_rejected = 0
        self.connections_throttled = 0  # held and closed for their IP's connection_creation_rate
        self._held: set[socket.socket] = set()
        self._accepting = False
        self._closed = False

    def start(self) -> None:
        self._set_accepting(True)

    def _set_accepting(self, accepting: bool) -> None:
        if accepting != self._accepting and not self._closed:
            if accepting:
                self.loop.add_reader(self.sock.fileno(), self._on_acceptable)
            else:
                self.loop.remove_reader(self.sock.fileno())
            self._accepting = accepting

    def _on_acceptable(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            if self.quotas.at_capacity:
                # New clients wait in the listen backlog until a connection closes, as in Kafka.
                self._set_accepting(False)
                self.quotas.wait_for_capacity(lambda: self._set_accepting(True))
                return
            try:
                sock, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.error("Error accepting a connection on %s: %s", self.endpoint.connection_string(), exc)
                return
            ip = normalize_ip(address[0])
            throttle_s = self.quotas.record_connection_creation(self.protected)
            if throttle_s > 0:  # max.connection.creation.rate: hold it, accept nothing meanwhile
                self._set_accepting(False)
                self.loop.call_later(throttle_s, self._admit_throttled, sock, ip)
                return
            self._admit(sock, ip)

    def _admit_throttled(self, sock: socket.socket, ip: str) -> None:
        if self._closed:
            sock.close()
            return
        self._admit(sock, ip)
        self._set_accepting(True)

    def _admit(self, sock: socket.socket, ip: str) -> None:
        hold_s = self.quotas.record_ip_connection(ip, self.protected)
        if hold_s > 0:  # over its IP's connection_creation_rate: held unserved, then closed (as Kafka does)
            log.debug("Delaying closing of connection from %s for %d ms", ip, hold_s * 1000)
            self.connections_throttled += 1
            self._held.add(sock)
            self.loop.call_later(hold_s, self._close_held, sock)
            return
        if not self.quotas.try_inc(ip):
            self.connections_rejected += 1
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     ip, self.quotas.max_for(ip))
            sock.close()
            return
        try:
            next(self._processors).accept(sock, ip, self.security)
        except OSError as exc:  # the client went away between accept and setup
            log.debug("Failed to set up the connection from %s: %s", ip, exc)
            sock.close()
            self.quotas.dec(ip)

    def _close_held(self, sock: socket.socket) -> None:
        self._held.discard(sock)
        sock.close()

    def close(self) -> None:
        self._set_accepting(False)
        self._closed = True
        self.sock.close()
        for sock in self._held:
            sock.close()
        self._held.clear()


class SocketServer:
    """Listeners, processors and the request channel of one broker."""

    def __init__(self, config: KafkaConfig, request_channel: RequestChannel | None = None,
                 api_versions: ApiVersionManager | None = None, credentials: CredentialCache | None = None) -> None:
        self.config = config
        self.request_channel = request_channel if request_channel is not None else RequestChannel(config.queued_max_requests)
        self.api_versions = api_versions or ApiVersionManager(config.unstable_api_versions_enable)
        self.quotas = ConnectionQuotas(config.max_connections, config.max_connections_per_ip,
                                       config.max_connections_per_ip_overrides,
                                       config.max_connection_creation_rate, config.quota_window_num,
                                       config.quota_window_size_seconds)
        self.memory_pool = MemoryPool(config.queued_max_request_bytes) if config.queued_max_request_bytes > 0 else None
        self.processors: list[Processor] = []
        self.acceptors: dict[str, Acceptor] = {}
        self.credentials = credentials if credentials is not None else CredentialCache()
        # Built (and checked) before anything binds: a bad keystore or JAAS config stops start-up.
        self.listener_security = [listener_security(config, ep, self.credentials) for ep in config.listeners]

    async def start(self) -> None:
        """Bind every listener and start accepting (port 0 binds a free port; see ``bound_port``)."""
        loop = asyncio.get_running_loop()
        config = self.config
        self.processors = [
            Processor(i, loop, self.request_channel, self.quotas, self.api_versions,
                      max_request_size=config.socket_request_max_bytes,
                      connections_max_idle_ms=config.connections_max_idle_ms,
                      send_buffer_bytes=config.socket_send_buffer_bytes,
                      receive_buffer_bytes=config.socket_receive_buffer_bytes, memory_pool=self.memory_pool)
            for i in range(config.num_network_threads)
        ]
        try:
            for security in self.listener_security:
                endpoint = security.endpoint
                protected = len(config.listeners) > 1 and endpoint.listener_name == config.inter_broker_listener_name
                acceptor = Acceptor(security, loop, self.processors, self.quotas,
                                    config.socket_listen_backlog_size, config.socket_receive_buffer_bytes, protected)
                self.acceptors[endpoint.listener_name] = acceptor
                log.info("Listening on %s (port %d)", endpoint.connection_string(), acceptor.port)
        except OSError:
            self.shutdown()
            raise
        for acceptor in self.acceptors.values():
            acceptor.start()

    def bound_port(self, listener_name: str) -> int:
        return self.acceptors[listener_name.upper()].port

    def shutdown(self) -> None:
        """Stop accepting, close every connection and wake the handlers to stop."""
        for acceptor in self.acceptors.values():
            acceptor.close()
        self.acceptors.clear()
        for processor in self.processors:
            processor.close()
        self.request_channel.close()

    # --- counters -------------------------------------------------------------------------------
    @property
    def connection_count(self) -> int:
        return sum(len(p.connections) for p in self.processors)

    @property
    def requests_received(self) -> int:
        return sum(p.requests_received for p in self.processors)

    @property
    def bytes_received(self) -> int:
        return sum(p.bytes_received for p in self.processors)

    @property
    def bytes_sent(self) -> int:
        return sum(p.bytes_sent for p in self.processors)

    @property
    def writes(self) -> int:
        return sum(p.writes for p in self.processors)
