"""KafkaChannel: one client connection, owned by a Processor.

Before Kafka requests flow, a connection goes through its listener's security: the TLS
handshake (SSL, SASL_SSL) and SASL authentication (SASL_*), both driven here on the network
thread (``AuthState``); the principal it ends with is stamped on each of its requests.

Reads size-prefixed frames into owned bytearrays (records decode as views into them), keeps
a few complete frames read ahead, and hands the connection's requests to the request
channel one at a time, as Kafka does by muting a channel while its request is in flight.
One exception: a Produce whose records are appended and that waits in the produce purgatory
for the ISR (acks=all) lets the next request through (``parked``), up to
``MAX_PENDING_REQUESTS`` unanswered, so a client's pipelined produces wait for replication
together instead of one replication round trip each. Requests are still processed in order
and answered in order (a later answer is held until the earlier ones are out).
Responses are queued as parts and written by ``flush``: consecutive buffers go out in one
``sendmsg`` (uvloop would make each ``write()`` its own syscall), file slices with
``os.sendfile``, except slices up to ``SMALL_FILE_SLICE_BYTES``, which are read in and join the
buffers around them. Reading pauses while the read-ahead is full, while the request channel has
no room for the next request, while the client is not reading its responses, or while the
requests read so far hold queued.max.request.bytes (the processors' ``MemoryPool``).
"""

from __future__ import annotations

import asyncio
import enum
import errno
import logging
import socket
import ssl
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from broker.network.request_channel import Request, Response, ResponseAction
from broker.network.transport_layer import PlaintextTransportLayer, SslTransportLayer
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.security.sasl_server_authenticator import SaslServerAuthenticator, Step
from protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from broker.network.channel_builder import ListenerSecurity
    from broker.network.processor import Processor

log = logging.getLogger(__name__)

RECEIVE_BUFFER_SIZE = 64 * 1024  # per processor; larger frames get a buffer of their own
MAX_READ_AHEAD_FRAMES = 64        # complete frames buffered behind the in-flight request
MAX_READ_AHEAD_BYTES = 1 << 20
MAX_PENDING_REQUESTS = 5          # unanswered requests past parked produces (the Java client's in-flight default)
FLUSH_THRESHOLD_BYTES = 256 * 1024  # queued response bytes that are written without waiting
IOV_MAX = 1024
# File slices up to this size are read in and written with the buffers around them: one sendmsg
# (one TCP segment) instead of sendmsg + sendfile + sendmsg for a fetch of a few batches, as
# followers and caught-up consumers mostly get; larger ones go by sendfile.
SMALL_FILE_SLICE_BYTES = 16 * 1024
INFINITE_BYTES = float("inf")
_BUFFER_TYPES = (bytes, bytearray, memoryview)
_SENDFILE_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK, errno.EBADF}


class ChannelState(enum.Enum):
    OPEN = "open"
    # The client closed its side: the requests it already sent are still handled (an acks=0
    # producer that sends and hangs up expects its data written), their responses dropped.
    DRAINING = "draining"
    CLOSED = "closed"


class AuthState(enum.Enum):
    HANDSHAKE = "handshake"         # TLS handshake in progress
    AUTHENTICATE = "authenticate"   # SASL exchange (first authentication or KIP-368 re-authentication)
    READY = "ready"                 # Kafka requests
    FAILED = "failed"               # authentication failed: the failure answer goes out after a delay


class KafkaChannel:
    def __init__(self, processor: Processor, sock: socket.socket, connection_id: str,
                 security: ListenerSecurity, client_address: tuple[str, int], client_ip: str) -> None:
        self.processor = processor
        self.sock = sock
        self.fd = sock.fileno()
        self.connection_id = connection_id
        self.security = security
        self.listener = security.endpoint
        self.client_address = client_address
        self.client_ip = client_ip
        self.request_address = (client_ip, client_address[1])  # what its requests carry
        self.state = ChannelState.OPEN
        self.transport = SslTransportLayer(sock) if isinstance(sock, ssl.SSLSocket) else PlaintextTransportLayer(sock)
        self.authenticator = (SaslServerAuthenticator(security.sasl, processor.api_versions)
                              if security.sasl is not None else None)
        self.auth_state = (AuthState.HANDSHAKE if isinstance(self.transport, SslTransportLayer)
                           else self._after_handshake_state())
        self.principal: KafkaPrincipal = ANONYMOUS
        self._handshake_wants: str | None = None
        self._close_when_flushed = False
        self._throttled = False  # muted by a client quota: no new request is read or dispatched
        self._throttle_until = 0.0
        self._throttle_timer: asyncio.TimerHandle | None = None
        self.in_flight: Request | None = None  # being processed: the next request waits
        self._pending: deque[Request] = deque()  # handed to the handlers and not answered, in order
        self._answered: dict[Request, Response] = {}  # answers held behind an earlier pending request
        self._partial = b""                   # the start of a frame that fits the receive buffer
        self._large: bytearray | None = None  # a frame too big for the receive buffer, being filled
        self._large_filled = 0
        self._frames: deque[bytearray] = deque()
        self._frames_bytes = 0
        self._blocked: Request | None = None  # parsed, waiting for room in the request channel
        self._sends: deque[Any] = deque()
        self._send_bytes = 0
        self._bytes_written = 0               # ever, on this connection
        # Responses being written, for the request metrics: (bytes written once it is out, request,
        # when the processor took it); empty while metrics are off.
        self._writes_in_progress: deque[tuple[int, Request, int]] = deque()
        self._file_sent = 0                   # bytes of the file slice at the head already sent
        self._reading = False
        self._writing = False
        self._held = 0                        # bytes of requests read and not yet answered (memory pool)
        self._waiting_for_memory = False
        self.last_active = time.monotonic()   # last read or completed write (connections.max.idle.ms)

    # --- state ------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.state is ChannelState.CLOSED

    @property
    def has_pending_work(self) -> bool:
        """A request in flight or responses unsent: not idle, whatever the clock says."""
        return self.in_flight is not None or self._blocked is not None or bool(self._sends) or bool(self._pending)

    def can_defer_flush(self) -> bool:
        """Wait for the next pipelined request's response so both go out in one write?

        Only while that request is queued but no handler has picked it up yet: a handler that
        has started either answers within this loop iteration or is waiting on something.
        """
        return (self.in_flight is not None and self.in_flight.dequeue_time_ns is None
                and self._send_bytes < FLUSH_THRESHOLD_BYTES and not self._writing)

    def start(self) -> None:
        if self.auth_state is AuthState.HANDSHAKE:
            self._handshake()
        else:
            self._update_reading()

    def _after_handshake_state(self) -> AuthState:
        return AuthState.AUTHENTICATE if self.authenticator is not None else AuthState.READY

    def _want_read(self) -> bool:
        if self.auth_state is AuthState.HANDSHAKE:
            return self._handshake_wants == "read"
        return (self.state is ChannelState.OPEN and self._blocked is None and not self._writing
                and not self._throttled and self.auth_state is not AuthState.FAILED and not self._close_when_flushed
                and len(self._frames) < MAX_READ_AHEAD_FRAMES and self._frames_bytes < MAX_READ_AHEAD_BYTES)

    # --- TLS handshake --------------------------------------------------------------------------
    def _handshake(self) -> None:
        try:
            wants = self.transport.handshake()
        except (ssl.SSLError, OSError) as exc:
            log.info("Failed authentication with /%s (SSL handshake failed: %s)", self.client_ip,
                     getattr(exc, "reason", None) or exc)
            self.close("SSL handshake failed")
            return
        self._handshake_wants = wants
        if wants is not None:
            self._set_writing(wants == "write")
            self._update_reading()
            return
        try:
            self.principal = self.security.ssl_principal(self.transport.peer_certificate())
        except ValueError as exc:  # no ssl.principal.mapping.rules rule matched
            log.info("Failed authentication with /%s (%s)", self.client_ip, exc)
            self.close("no principal for the client certificate")
            return
        self.auth_state = self._after_handshake_state()
        self._set_writing(False)
        self._update_reading()
        # TLS 1.3 clients may send their first request with the handshake's last flight:
        # OpenSSL may hold it already, and the socket would not become readable again for it.
        self._on_readable()

    def _update_reading(self) -> None:
        want = self._want_read()
        pool = self.processor.memory_pool
        if want and pool is not None and pool.is_out_of_memory:
            want = False  # read again once finished requests free their bytes
            if not self._waiting_for_memory:
                self._waiting_for_memory = True
                pool.wait_for_memory(self._memory_freed)
        if want != self._reading:
            loop = self.processor.loop
            if want:
                loop.add_reader(self.fd, self._on_readable)
            else:
                loop.remove_reader(self.fd)
            self._reading = want

    def _memory_freed(self) -> None:
        self._waiting_for_memory = False
        if not self.closed:
            self._update_reading()

    def _hold(self, size: int) -> None:
        pool = self.processor.memory_pool
        if pool is not None:
            pool.allocate(size)
            self._held += size

    def _release(self, size: int) -> None:
        pool = self.processor.memory_pool
        if pool is not None:
            self._held -= size
            pool.release(size)

    # --- receiving ----------------------------------------------------------------------------
    def _on_readable(self) -> None:
        if self.auth_state is AuthState.HANDSHAKE:
            self._handshake()
            return
        if not self._reading:
            return
        pool = self.processor.memory_pool
        if pool is not None and pool.is_out_of_memory:  # another connection's read used the last bytes
            self._update_reading()
            return
        try:
            if self._large is not None:
                n = self.transport.recv_into(memoryview(self._large)[self._large_filled:])
            else:
                n = self.transport.recv_into(self.processor.receive_buffer,
                                             RECEIVE_BUFFER_SIZE - len(self._partial))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(f"read failed: {exc}")
            return
        if n == 0:
            self._drain()
            return
        self.processor.bytes_received += n
        self.last_active = time.monotonic()
        if self._large is not None:
            self._large_filled += n
            if self._large_filled == len(self._large):
                self._push_frame(self._large)
                self._large = None
        else:
            received = memoryview(self.processor.receive_buffer)[:n]
            if not self._extract_frames(memoryview(self._partial + received) if self._partial else received):
                return
        self._dispatch_next()
        self._update_reading()
        if self._reading and self.transport.pending():
            # Decrypted bytes already inside OpenSSL do not make the socket readable.
            self.processor.loop.call_soon(self._on_readable)

    def _push_frame(self, frame: bytearray) -> None:
        self._frames.append(frame)
        self._frames_bytes += len(frame)

    def _extract_frames(self, view: memoryview) -> bool:
        """Copy complete frames out of ``view`` and keep the rest; False if the connection was closed.

        ``view`` is the processor's shared receive buffer (or a copy of it joined to the
        previous partial frame), so an idle connection holds no buffer of its own.
        """
        pos, end = 0, len(view)
        authenticating = self.auth_state is AuthState.AUTHENTICATE and self.authenticator is not None
        max_size = self.authenticator.config.max_receive_size if authenticating else self.processor.max_request_size
        while end - pos >= 4:
            size = int.from_bytes(view[pos:pos + 4], "big", signed=True)
            if size < 0 or size > max_size:
                reason = (f"invalid receive (size = {size} "
                          + (f"larger than {max_size})" if size > 0 else "is negative)"))
                if authenticating:
                    self._authentication_failed(Step(failure="Failing SASL authentication due to invalid "
                                                             f"receive size: {reason}"))
                else:
                    self.close(reason, logging.WARNING)
                return False
            if end - pos - 4 >= size:
                self._hold(size)
                self._push_frame(bytearray(view[pos + 4:pos + 4 + size]))
                pos += 4 + size
                continue
            if size + 4 > RECEIVE_BUFFER_SIZE:
                self._hold(size)
                self._large = bytearray(size)
                have = end - pos - 4
                self._large[:have] = view[pos + 4:end]
                self._large_filled = have
                pos = end
            break
        self._partial = bytes(view[pos:end])
        return True

    # --- dispatching --------------------------------------------------------------------------
    def _drain(self) -> None:
        """End of stream: handle every complete request received, then close."""
        self.state = ChannelState.DRAINING
        if self._large is not None:
            self._release(len(self._large))
        self._partial, self._large = b"", None  # a partial frame can never complete now
        self._sends.clear()
        self._send_bytes = 0
        self._responses_written(INFINITE_BYTES)  # never written: the client is gone
        self._set_writing(False)
        self._update_reading()
        self._dispatch_next()
        self._close_if_drained()

    def _close_if_drained(self) -> None:
        if (self.state is ChannelState.DRAINING and self.in_flight is None and not self._pending
                and self._blocked is None
                and (not self._frames or self.auth_state is not AuthState.READY)):
            self.close("closed by the client")

    def _dispatch_next(self) -> None:
        if self.state is ChannelState.CLOSED or self.in_flight is not None or self._blocked is not None \
                or self._throttled or len(self._pending) >= MAX_PENDING_REQUESTS:
            return
        while self._frames and not self._writing and self.state is ChannelState.OPEN \
                and self.auth_state is AuthState.AUTHENTICATE:
            self._authenticate(self._pop_frame())
        if self._writing or not self._frames or self.auth_state is not AuthState.READY:
            return
        frame = self._pop_frame()
        if self.authenticator is not None and not self._check_session(frame):
            return
        request = self.processor.parse_request(self, frame)
        if request is not None:
            request.principal = self.principal
            self._send_to_channel(request)

    def _pop_frame(self) -> bytearray:
        frame = self._frames.popleft()
        self._frames_bytes -= len(frame)
        return frame

    # --- SASL -------------------------------------------------------------------------------------
    def _check_session(self, frame: bytearray) -> bool:
        """KIP-368 on an authenticated SASL connection: SaslHandshake starts re-authentication;
        any other request after the session expired closes the connection. False: frame consumed."""
        authenticator = self.authenticator
        assert authenticator is not None
        api_key = int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1
        if api_key == ApiKey.SASL_HANDSHAKE and authenticator.client_supports_reauth:
            self.auth_state = AuthState.AUTHENTICATE
            self._release(len(frame))
            self._apply_step(authenticator.begin_reauthentication(bytes(frame)))
            return False
        expiry = authenticator.session_expiration_ns
        if expiry is not None and time.monotonic_ns() > expiry:
            self.close("the SASL session expired (connections.max.reauth.ms)", logging.DEBUG)
            return False
        return True

    def _authenticate(self, frame: bytearray) -> None:
        """A frame of the SASL exchange: answered here, it never becomes a request (its bytes are freed)."""
        assert self.authenticator is not None
        self._release(len(frame))
        self._apply_step(self.authenticator.receive(frame))

    def _apply_step(self, step: Step) -> None:
        if step.close is not None:
            self.close(step.close, logging.WARNING)
            return
        if step.failure is not None:
            self._authentication_failed(step)
            return
        self._queue(step.send)
        if step.complete:
            assert self.authenticator is not None and self.authenticator.principal is not None
            self.principal = self.authenticator.principal
            self.auth_state = AuthState.READY

    def _authentication_failed(self, step: Step) -> None:
        """Kafka's delayed close: the failure answer and the close come connection.failed.authentication.delay.ms
        later, so that guessing passwords is slow; the connection reads nothing meanwhile."""
        reauth = self.authenticator is not None and self.authenticator.reauthenticating
        log.info("Failed %sauthentication with /%s (%s)", "re-" if reauth else "", self.client_ip, step.failure)
        self.auth_state = AuthState.FAILED
        self._frames.clear()
        self._frames_bytes = 0
        self._update_reading()
        self.processor.loop.call_later(self.security.failed_authentication_delay_ms / 1000,
                                       self._send_failure_and_close, step.failure_response)

    def _send_failure_and_close(self, response: list[Any]) -> None:
        if self.closed:
            return
        if not response and not self._sends:
            self.close("authentication failed")
            return
        self._queue(response)
        self._close_when_flushed = True

    def _queue(self, parts: list[Any]) -> None:
        if parts:
            self._sends.extend(parts)
            self._send_bytes += sum(len(p) for p in parts)
            if not self._writing:
                self.processor.mark_dirty(self)

    def _send_to_channel(self, request: Request) -> None:
        channel = self.processor.request_channel
        if channel.try_send_request(request):
            self.in_flight = request
            self._pending.append(request)
            self.processor.requests_received += 1
        else:
            self._blocked = request
            channel.wait_for_space(self._retry_blocked)
            self._update_reading()

    def _retry_blocked(self) -> None:
        request, self._blocked = self._blocked, None
        if request is None or self.closed:
            return
        self._send_to_channel(request)
        self._update_reading()

    def parked(self, request: Request) -> None:
        """``request`` (a Produce) is appended and waits for the ISR: the next request may go ahead."""
        if request is self.in_flight and request.header.api_key == ApiKey.PRODUCE and not self.closed:
            self.in_flight = None
            self._dispatch_next()
            self._update_reading()

    def complete(self, response: Response) -> None:
        """A pending request's response: queue it (after the earlier ones), then let the next request through."""
        request = response.request
        if not self._pending or (request is not self._pending[0] and request not in self._pending):
            log.error("Dropping response for %s: it is not a pending request of %s", request, self.connection_id)
            return
        if request is self.in_flight:
            self.in_flight = None
        if request is not self._pending[0]:  # an earlier request is still waiting for its answer
            self._answered[request] = response
            self._dispatch_next()
            self._update_reading()
            return
        self._pending.popleft()
        if not self._emit(response):
            return
        while self._pending and self._pending[0] in self._answered:
            if not self._emit(self._answered.pop(self._pending.popleft())):
                return
        if self.state is ChannelState.DRAINING:
            self._dispatch_next()
            self._close_if_drained()
            return
        # Dispatch before asking for a flush: a handler that answers the next request right
        # away then does so before the flush runs, and both responses share one write.
        self._dispatch_next()
        self._update_reading()
        if self._sends and not self._writing:
            if (self.in_flight is None and not self._pending) or self._send_bytes >= FLUSH_THRESHOLD_BYTES:
                self.flush()  # no other answer of this connection can join the write, or enough to send
            else:
                self.processor.mark_dirty(self)

    def _emit(self, response: Response) -> bool:
        """Queue the answer of the oldest pending request; False if that closed the connection."""
        self._release(len(response.request.buffer))
        metrics = self.processor.request_channel.metrics
        if self.state is ChannelState.DRAINING:
            if metrics is not None:  # dropped: the client is gone (Kafka still counts the request)
                now = time.monotonic_ns()
                metrics.on_complete(response.request, now, now)
            if response.action is ResponseAction.CLOSE:
                self.close("the request handler closed the connection", logging.DEBUG)
                return False
            return True
        if response.action is ResponseAction.CLOSE:
            if metrics is not None:
                now = time.monotonic_ns()
                metrics.on_complete(response.request, now, now)
            self.close("the request handler closed the connection", logging.DEBUG)
            return False
        if response.action is ResponseAction.SEND:
            self._sends.extend(response.parts)
            self._send_bytes += response.size()
            if metrics is not None:
                self._writes_in_progress.append(
                    (self._bytes_written + self._send_bytes, response.request, time.monotonic_ns()))
        elif metrics is not None:  # nothing to write (acks=0)
            now = time.monotonic_ns()
            metrics.on_complete(response.request, now, now)
        if response.throttle_ms > 0:
            self._throttle(response.throttle_ms)
        return True

    def _throttle(self, throttle_ms: int) -> None:
        """Kafka's channel muting for a quota violation: the response still goes out now."""
        until = time.monotonic() + throttle_ms / 1000
        if until <= self._throttle_until:
            return
        self._throttled, self._throttle_until = True, until
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self._throttle_timer = self.processor.loop.call_later(throttle_ms / 1000, self._end_throttling)

    def _end_throttling(self) -> None:
        self._throttled, self._throttle_until, self._throttle_timer = False, 0.0, None
        if not self.closed:
            self._dispatch_next()
            self._update_reading()

    # --- sending ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write as much of the queued responses as the socket takes without blocking."""
        if self.auth_state is AuthState.HANDSHAKE:
            self._handshake()
            return
        sends = self._sends
        try:
            while sends and self.state is ChannelState.OPEN:
                if self._is_buffer(0):
                    if not self._send_buffers():
                        break
                elif not self._send_file():
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self.close(f"write failed: {exc}")
            return
        if self.closed:
            return
        was_writing = self._writing
        self._set_writing(bool(sends))
        if not sends:
            if self._close_when_flushed:
                self.close("authentication failed")
                return
            self.last_active = time.monotonic()
            if was_writing:  # requests waited for the socket to take our answers
                self._dispatch_next()
                self._update_reading()

    def _is_buffer(self, index: int) -> bool:
        """Whether queued part ``index`` goes out with sendmsg; a small file slice not yet begun is
        read in here (a read from the page cache, where sendfile would cost two more writes)."""
        part = self._sends[index]
        if isinstance(part, _BUFFER_TYPES):
            return True
        size = len(part)
        if size > SMALL_FILE_SLICE_BYTES or (index == 0 and self._file_sent) or not hasattr(part, "read_bytes"):
            return False
        data = part.read_bytes()
        if len(data) != size:  # truncated under us: the frame's size is already written (as _send_file)
            raise OSError(errno.EIO, f"file slice shrank while being sent ({len(data)} of {size} bytes)")
        self._sends[index] = data
        return True

    def _send_buffers(self) -> bool:
        """One sendmsg of the leading buffers; True if all of them went out."""
        sends = self._sends
        batch = []
        for index in range(min(len(sends), IOV_MAX)):
            part = sends[index]
            if not isinstance(part, _BUFFER_TYPES):
                if not self._is_buffer(index):
                    break
                part = sends[index]
            batch.append(part)
        sent = self.transport.send_buffers(batch)
        self._sent(sent)
        if self._send_bytes == 0:  # everything queued went out: the usual case
            sends.clear()
            return True
        remaining = sent
        for _ in range(len(batch)):
            size = len(sends[0])
            if remaining < size:
                sends[0] = memoryview(sends[0])[remaining:]
                return False
            remaining -= size
            sends.popleft()
        return True

    def _send_file(self) -> bool:
        """sendfile() the file slice at the head; True once it is fully sent."""
        part = self._sends[0]
        length = len(part)
        if self._file_sent >= length:
            self._sends.popleft()
            self._file_sent = 0
            return True
        fileno, position = getattr(part, "fileno", None), getattr(part, "position", None)
        if fileno is None or position is None:
            self._replace_file_with_bytes(part)
            return True
        try:
            sent = self.transport.send_file(fileno(), position + self._file_sent, length - self._file_sent)
        except BlockingIOError:
            raise
        except OSError as exc:
            if exc.errno not in _SENDFILE_UNSUPPORTED:
                raise
            self._replace_file_with_bytes(part)
            return True
        if sent == 0:
            raise OSError(errno.EIO, f"file slice shrank while being sent ({self._file_sent} of {length} bytes)")
        self._sent(sent)
        self._file_sent += sent
        if self._file_sent < length:
            return False
        self._sends.popleft()
        self._file_sent = 0
        return True

    def _replace_file_with_bytes(self, part: Any) -> None:
        data = part.read_bytes() if hasattr(part, "read_bytes") else bytes(part)
        self._sends[0] = memoryview(data)[self._file_sent:]
        self._file_sent = 0

    def _sent(self, n: int) -> None:
        self._send_bytes -= n
        self._bytes_written += n
        self.processor.bytes_sent += n
        self.processor.writes += 1
        in_progress = self._writes_in_progress
        if in_progress and in_progress[0][0] <= self._bytes_written:
            self._responses_written(self._bytes_written)

    def _responses_written(self, written: float) -> None:
        """Request metrics for the responses whose last byte is out (all of them when ``written`` is
        infinite: the connection closed, and Kafka counts unsent responses as done)."""
        metrics = self.processor.request_channel.metrics
        in_progress = self._writes_in_progress
        now = time.monotonic_ns()
        while in_progress and in_progress[0][0] <= written:
            _, request, dequeued = in_progress.popleft()
            if metrics is not None:
                metrics.on_complete(request, dequeued, now)

    def _set_writing(self, blocked: bool) -> None:
        if blocked != self._writing:
            if blocked:
                self.processor.loop.add_writer(self.fd, self.flush)
            else:
                self.processor.loop.remove_writer(self.fd)
            self._writing = blocked
            self._update_reading()

    # --- closing ------------------------------------------------------------------------------
    def close(self, reason: str, level: int = logging.DEBUG) -> None:
        if self.state is ChannelState.CLOSED:
            return
        self.state = ChannelState.CLOSED
        log.log(level, "Closing connection %s from %s: %s", self.connection_id, self.client_ip, reason)
        loop = self.processor.loop
        if self._reading:
            loop.remove_reader(self.fd)
        if self._writing:
            loop.remove_writer(self.fd)
        self._reading = self._writing = False
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self._frames.clear()
        self._sends.clear()
        self._responses_written(INFINITE_BYTES)
        self._blocked = None
        self.in_flight = None
        self._pending.clear()
        self._answered.clear()
        self._release(self._held)
        try:
            self.sock.close()
        finally:
            self.processor.connection_closed(self)
