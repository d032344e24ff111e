"""RequestChannel: the bounded hand-off between processors and request handlers.

Processors put parsed-header requests in; handler workers take them out; responses go
back to the processor that owns the connection. The queue holds at most
``queued.max.requests``: when it is full a processor stops reading from the connection
whose request did not fit and is called back when space frees (Kafka's processors block
on the same queue; here only the affected connections wait).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.security.principal import ANONYMOUS, KafkaPrincipal
from protocol.api_keys import request_class
from protocol.framing import encode_response_parts, frame_response_parts
from protocol.headers import RequestHeader
from protocol.messages import Message

if TYPE_CHECKING:
    from broker.metrics.request_metrics import RequestMetrics
    from broker.network.processor import Processor



class Request:
    """One received request: header parsed, body still raw (``buffer`` is the whole frame)."""

    __slots__ = ("processor", "connection_id", "header", "buffer", "listener_name", "security_protocol",
                 "client_address", "principal", "receive_time_ns", "dequeue_time_ns", "handler_time_ns",
                 "api_local_complete_ns", "response_complete_ns", "throttle_time_ms", "_body")

    def __init__(self, processor: Processor, connection_id: str, header: RequestHeader, buffer: bytearray,
                 listener_name: str, security_protocol: str, client_address: tuple[str, int]) -> None:
        self.processor = processor
        self.connection_id = connection_id
        self.header = header
        self.buffer = buffer
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.client_address = client_address
        self.principal: KafkaPrincipal = ANONYMOUS  # the connection's, once authenticated
        self.receive_time_ns = time.monotonic_ns()
        self.dequeue_time_ns: int | None = None  # set when a handler picks it up
        self.handler_time_ns = 0                  # how long its handler ran (for request_percentage quotas)
        self.api_local_complete_ns: int | None = None  # its handler returned (answered, or parked)
        self.response_complete_ns: int | None = None   # its response was handed to the processor
        self.throttle_time_ms = 0  # a client quota's throttle of its response (RequestMetrics ThrottleTimeMs)
        self._body: Message | None = None

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def body_bytes(self) -> memoryview:
        return memoryview(self.buffer)[self.header.header_size:]

    def body(self) -> Message:
        """Decode the body once (raises ProtocolError); records fields are views into ``buffer``.

        Bytes after the body are ignored, as Kafka's request parser ignores them:
        librdkafka 2.x sends some requests (e.g. Metadata v12) with a few extra bytes.
        """
        if self._body is None:
            cls = request_class(self.header.api_key)
            self._body, _ = cls.decode_from(self.buffer, self.header.header_size, self.header.api_version)
        return self._body

    def __repr__(self) -> str:
        return f"Request({self.header!r}, connection={self.connection_id}, size={len(self.buffer)})"


class ResponseAction(enum.Enum):
    SEND = "send"          # write the parts, then serve the connection's next request
    NO_OP = "no_op"        # nothing to write (acks=0 produce); serve the next request
    CLOSE = "close"        # close the connection (e.g. acks=0 produce that failed)


class Response:
    __slots__ = ("request", "action", "parts", "body", "version", "throttle_ms")

    def __init__(self, request: Request, action: ResponseAction, parts: list[Any] | None = None,
                 body: Message | None = None, version: int = 0) -> None:
        self.request = request
        self.action = action
        self.parts = parts or []
        self.body = body
        self.version = version
        self.throttle_ms = 0  # mute the connection this long once the response is queued (quotas)

    @classmethod
    def send(cls, request: Request, body: Message, version: int | None = None) -> Response:
        """Encode ``body`` at the request's version (or ``version``, e.g. 0 for ApiVersions fallback)."""
        header = request.header
        version = header.api_version if version is None else version
        parts = encode_response_parts(body, header.api_key, version, header.correlation_id)
        return cls(request, ResponseAction.SEND, parts, body, version)

    @classmethod
    def send_encoded(cls, request: Request, body: Message, parts: list[Any]) -> Response:
        """``send`` of a body encoded before, at the request's version, as ``parts`` (``encode_parts``);
        ``body`` is what ``throttle`` changes and encodes again, so it must be the caller's own."""
        header = request.header
        return cls(request, ResponseAction.SEND,
                   frame_response_parts(parts, header.api_key, header.api_version, header.correlation_id),
                   body, header.api_version)

    def throttle(self, throttle_ms: int) -> None:
        """Kafka's quota throttling: the response says ``throttle_time_ms`` and the connection is muted
        that long (re-encoded only in this rare case)."""
        self.throttle_ms = self.request.throttle_time_ms = throttle_ms
        body = self.body
        if body is not None and "throttle_time_ms" in type(body)._fields:
            body.throttle_time_ms = throttle_ms
            header = self.request.header
            self.parts = encode_response_parts(body, header.api_key, self.version, header.correlation_id)

    @classmethod
    def no_op(cls, request: Request) -> Response:
        return cls(request, ResponseAction.NO_OP)

    @classmethod
    def close(cls, request: Request) -> Response:
        return cls(request, ResponseAction.CLOSE)

    def size(self) -> int:
        return sum(map(len, self.parts))

    def __repr__(self) -> str:
        return f"Response({self.action.value}, {self.request!r})"


class RequestChannel:
    """Bounded FIFO of requests; wakes idle handler workers and processors waiting for space."""

    def __init__(self, queue_size: int) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self.queue_size = queue_size
        self._queue: deque[Request] = deque()
        self._receivers: deque[asyncio.Future[Request | None]] = deque()
        self._space_waiters: deque[Callable[[], None]] = deque()
        self._closed = False
        # Workers sending a response, each about to ask for its next request: the requests that
        # response lets through (its connection's next) are queued for them rather than handed
        # to an idle worker, saving a task wake-up and a loop iteration per pipelined request.
        self.finishing = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # the handlers' (get_running_loop costs a getpid)
        # Sees every response before it goes to its connection (the broker's client quotas).
        self.response_hook: Callable[[Response], None] | None = None
        # Kafka's request metrics, kept only while the metrics endpoint is on.
        self.metrics: RequestMetrics | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def try_send_request(self, request: Request) -> bool:
        """Queue a request; False (and nothing queued) when the channel is full."""
        if self._closed:
            return False
        while self._receivers and len(self._queue) >= self.finishing:
            waiter = self._receivers.popleft()
            if not waiter.done():
                waiter.set_result(request)
                return True
        if len(self._queue) >= self.queue_size:
            return False
        self._queue.append(request)
        return True

    def wait_for_space(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when a slot frees up (synchronously; it must not raise)."""
        self._space_waiters.append(callback)

    async def receive_request(self) -> Request | None:
        """Next request for a handler worker; None once the channel is closed."""
        if self._queue:
            request = self._queue.popleft()
            self._space_freed()
        elif self._closed:
            return None
        else:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            waiter: asyncio.Future[Request | None] = loop.create_future()
            self._receivers.append(waiter)
            try:
                request = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    # Handed over just before the cancel: give it to another worker.
                    self._queue.appendleft(waiter.result())  # type: ignore[arg-type]
                raise
        if request is not None:
            request.dequeue_time_ns = time.monotonic_ns()
        return request

    def send_response(self, response: Response) -> None:
        """Route a response to the processor owning the request's connection (on the loop thread)."""
        if self.response_hook is not None:
            self.response_hook(response)
        if self.metrics is not None:
            response.request.response_complete_ns = time.monotonic_ns()
            self.metrics.on_response(response)
        response.request.processor.enqueue_response(response)

    def close(self) -> None:
        """Wake every waiting worker with None; later requests are refused."""
        self._closed = True
        while self._receivers:
            waiter = self._receivers.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _space_freed(self) -> None:
        # A waiter whose connection has gone away takes no slot, so keep going while there is room.
        while self._space_waiters and len(self._queue) < self.queue_size and not self._closed:
            self._space_waiters.popleft()()
