"""KafkaRequestHandlerPool: ``num.io.threads`` workers taking requests off the channel.

How handlers run, and why: each worker is an asyncio task on the broker's single event
loop, not an OS thread. Python threads would serialise on the GIL for the protocol work that
dominates request handling (decoding, building responses), and would need locks around
every piece of broker state; tasks share that state safely and may ``await`` (delayed
produce/fetch, coordinator waits) without holding a thread. Calls that can block for long
(fsync, segment roll and deletion, log recovery) go through ``run_blocking`` to a thread
pool of the same size, so a slow disk does not stall the loop; ordinary appends and reads
are short pwrite/pread calls and stay on the loop.

A handler is ``async def handle(request) -> Response | None``. Returning a Response sends
it. Returning None means the handler parked the request (e.g. in a purgatory) and will call
``request_channel.send_response`` itself, so a long poll does not occupy a worker: the
workers bound how many requests are being *processed* at once, not how many are waiting.
A handler that raises anyway gets its connection closed, with the traceback logged: answering
with error codes, even for a failing handler, is the handler function's job (``KafkaApis``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from broker.network.request_channel import Request, RequestChannel, Response

log = logging.getLogger(__name__)

T = TypeVar("T")
# Requests a worker takes from the queue in a row before it lets the loop run (reads, timers,
# flushes): a connection's pipelined requests go to the worker that answered the one before,
# without a loop iteration each (see RequestChannel.finishing).
MAX_REQUESTS_WITHOUT_YIELD = 16
RequestHandler = Callable[[Request], Awaitable[Response | None]]


class KafkaRequestHandlerPool:
    def __init__(self, request_channel: RequestChannel, handler: RequestHandler, num_threads: int) -> None:
        if num_threads < 1:
            raise ValueError("num_threads must be at least 1")
        self.request_channel = request_channel
        self.handler = handler
        self.num_threads = num_threads
        self.requests_handled = 0
        # Kafka's RequestHandlerAvgIdlePercent: how long the workers waited for a request.
        self.started_ns = time.monotonic_ns()
        self.idle_ns = 0                              # finished waits, all workers
        self._idle_since = [0] * num_threads          # when each worker began waiting; 0 while it works
        self._workers: list[asyncio.Task[None]] = []
        self._executor = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="kafka-io")

    def start(self) -> None:
        self.started_ns = time.monotonic_ns()
        self._workers = [asyncio.get_running_loop().create_task(self._run(i), name=f"kafka-request-handler-{i}")
                         for i in range(self.num_threads)]

    def idle_time_ns(self) -> int:
        """Nanoseconds the workers spent waiting for requests so far, waits in progress included."""
        now = time.monotonic_ns()
        return self.idle_ns + sum(now - since for since in self._idle_since if since)

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking call (fsync, file deletion, ...) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _run(self, index: int) -> None:
        channel = self.request_channel
        idle_since = self._idle_since
        in_a_row = 0
        while True:
            if len(channel):  # taken without waiting
                in_a_row += 1
                if in_a_row >= MAX_REQUESTS_WITHOUT_YIELD:
                    in_a_row = 0
                    await asyncio.sleep(0)
            else:
                in_a_row = 0
            idle_since[index] = waiting = time.monotonic_ns()
            request = await channel.receive_request()
            idle_since[index] = 0
            if request is None:  # the channel was closed: shut down
                return
            self.idle_ns += (request.dequeue_time_ns or waiting) - waiting
            response = await self._handle(request)
            self.requests_handled += 1
            if response is not None:
                channel.finishing += 1  # the connection's next request, dispatched now, is ours
                try:
                    channel.send_response(response)
                except Exception:  # a bug in the network layer must not cost a worker
                    log.exception("Failed to send %r", response)
                finally:
                    channel.finishing -= 1

    async def _handle(self, request: Request) -> Response | None:
        start = time.monotonic_ns()
        try:
            return await self.handler(request)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Closing connection %s: unexpected error handling %r", request.connection_id, request.header)
        finally:
            end = request.api_local_complete_ns = time.monotonic_ns()
            request.handler_time_ns = end - start
        return Response.close(request)

    async def shutdown(self, timeout_s: float = 5.0) -> None:
        """Close the channel, let the workers finish their current request, then stop them."""
        self.request_channel.close()
        if self._workers:
            _, pending = await asyncio.wait(self._workers, timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        self._executor.shutdown(wait=False, cancel_futures=True)
