"""Shared by the group handlers: finding the coordinator and answering once a wait is over.

JoinGroup, SyncGroup and OffsetCommit may wait (for a rebalance, for replication), and so may
WriteTxnMarkers, TxnOffsetCommit and a Produce being verified with its transaction coordinator;
like the produce purgatory, the handler returns None and the answer is sent when the wait ends,
so a waiting request does not occupy a request handler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from broker.handlers import answer, failure_response
from broker.network.request_channel import Request, Response
from protocol.errors import Errors, KafkaApiError
from protocol.messages import Message

if TYPE_CHECKING:
    from broker.coordinator.group.group_metadata import OffsetAndMetadata
    from broker.coordinator.group.group_coordinator import GroupCoordinator
    from broker.services import BrokerServices

log = logging.getLogger(__name__)

T = TypeVar("T")
TopicPartition = tuple[str, int]
_waiting: set[asyncio.Future[Any]] = set()


def group_coordinator(services: BrokerServices) -> GroupCoordinator:
    coordinator = services.group_coordinator
    if coordinator is None:
        raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE)
    return coordinator


def client_host(request: Request) -> str:
    """As Kafka prints an InetAddress: ``/127.0.0.1``."""
    return f"/{request.client_address[0]}"


def split_commit(services: BrokerServices, topics: Any, offset_of: Callable[[Any], OffsetAndMetadata]
                 ) -> tuple[dict[TopicPartition, Errors], dict[TopicPartition, OffsetAndMetadata]]:
    """An (Txn)OffsetCommit's partitions: UNKNOWN_TOPIC_OR_PARTITION for those the cluster does not
    know, the offset ``offset_of`` makes of each request partition for the rest."""
    errors: dict[TopicPartition, Errors] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if services.metadata_cache.partition(*tp) is None:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = offset_of(p)
    return errors, offsets


def every_partition(topics: Any, error: Errors) -> dict[TopicPartition, Errors]:
    return {(t.name, p.partition_index): error for t in topics for p in t.partitions}


def respond_later(services: BrokerServices, request: Request, awaitable: Awaitable[T],
                  build: Callable[[T], Message]) -> Response | None:
    """The response now if ``awaitable`` is already done, else None and the response when it is."""
    future = asyncio.ensure_future(awaitable)

    def respond(done: asyncio.Future[T]) -> Response:
        return answer(request, lambda: build(done.result()))

    if future.done():
        return respond(future)
    _send_when_done(services, request, future, respond)
    return None


def complete_later(services: BrokerServices, request: Request, awaitable: Awaitable[Response | None]) -> None:
    """Finish handling a request without holding a handler (the produce path while a transaction is
    verified); the Response it ends with is sent, None means it arranged its own answer."""
    def respond(done: asyncio.Future[Response | None]) -> Response | None:
        try:
            return done.result()
        except Exception as exc:
            return failure_response(request, exc)

    _send_when_done(services, request, asyncio.ensure_future(awaitable), respond)


def _send_when_done(services: BrokerServices, request: Request, future: asyncio.Future[T],
                    respond: Callable[[asyncio.Future[T]], Response | None]) -> None:
    def send(done: asyncio.Future[T]) -> None:
        _waiting.discard(done)
        if done.cancelled():
            return  # the broker is shutting down
        try:
            response = respond(done)
            if response is not None:
                services.request_channel.send_response(response)
        except Exception:  # the connection or the server went away meanwhile
            log.debug("Dropping the late answer to %r", request.header, exc_info=True)

    _waiting.add(future)
    future.add_done_callback(send)
