"""Shared by the group handlers: finding the coordinator and answering once a wait is over.

JoinGroup, SyncGroup and OffsetCommit may wait (for a rebalance, for replication); like the
produce purgatory, the handler returns None and the answer is sent when the wait ends, so a
waiting member does not occupy a request handler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from broker.handlers import answer
from broker.network.request_channel import Request, Response
from protocol.errors import Errors, KafkaApiError
from protocol.messages import Message

if TYPE_CHECKING:
    from broker.coordinator.group.group_coordinator import GroupCoordinator
    from broker.services import BrokerServices

log = logging.getLogger(__name__)

T = TypeVar("T")
_waiting: set[asyncio.Future[Any]] = set()


def group_coordinator(services: BrokerServices) -> GroupCoordinator:
    coordinator = services.group_coordinator
    if coordinator is None:
        raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE)
    return coordinator


def client_host(request: Request) -> str:
    """As Kafka prints an InetAddress: ``/127.0.0.1``."""
    return f"/{request.client_address[0]}"


def respond_later(services: BrokerServices, request: Request, awaitable: Awaitable[T],
                  build: Callable[[T], Message]) -> Response | None:
    """The response now if ``awaitable`` is already done, else None and the response when it is."""
    future = asyncio.ensure_future(awaitable)

    def respond(done: asyncio.Future[T]) -> Response:
        return answer(request, lambda: build(done.result()))

    if future.done():
        return respond(future)

    def send(done: asyncio.Future[T]) -> None:
        _waiting.discard(done)
        if done.cancelled():
            return  # the broker is shutting down
        try:
            services.request_channel.send_response(respond(done))
        except Exception:  # the connection or the server went away meanwhile
            log.debug("Dropping the late answer to %r", request.header, exc_info=True)

    _waiting.add(future)
    future.add_done_callback(send)
    return None
