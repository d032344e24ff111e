"""Waiting for the metadata cache to show an admin change (Kafka's DelayedCreatePartitions,
DelayedDeleteTopics, DelayedElectLeader), and calling the controller from the event loop.

The cache is updated by UpdateMetadata on the event loop; the wait re-checks the condition
every few milliseconds until it holds or the request's timeout passes; `respond_when` parks
the request meanwhile so that it does not occupy a request handler (Kafka's topic purgatory).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, TypeVar

from broker.handlers import failure_response
from broker.metadata_cache import NO_LEADER
from broker.network.request_channel import Request, Response

if TYPE_CHECKING:
    from broker.services import BrokerServices


T = TypeVar("T")
POLL_INTERVAL_S = 0.02


async def wait_until(condition: Callable[[], bool], timeout_ms: int) -> bool:
    """True once `condition()` holds; False if it still does not after `timeout_ms`."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    while True:
        if condition():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(POLL_INTERVAL_S, remaining))


def missing_leaders(services: BrokerServices, topic: str, partitions: list[int]) -> int:
    """Partitions of `topic` the metadata cache does not know or knows without a leader."""
    cache = services.metadata_cache
    missing = 0
    for p in partitions:
        state = cache.partition(topic, p)
        if state is None or state.leader == NO_LEADER:
            missing += 1
    return missing


async def controller_result(future: Future[T]) -> T:
    """Await a KafkaController event's concurrent Future on the event loop."""
    return await asyncio.wrap_future(future)


_parked: set[asyncio.Task[None]] = set()


def respond_when(
    services: BrokerServices,
    request: Request,
    condition: Callable[[], bool],
    timeout_ms: int,
    respond: Callable[[], Response],
) -> None:
    """Answer `request` with `respond()` once `condition` holds or the timeout passes, without
    keeping a request handler busy meanwhile (the handler then returns None)."""

    async def run() -> None:
        try:
            await wait_until(condition, timeout_ms)
            response = respond()
        except Exception as exc:
            response = failure_response(request, exc)
        services.request_channel.send_response(response)

    task = asyncio.get_running_loop().create_task(run())
    _parked.add(task)
    task.add_done_callback(_parked.discard)
