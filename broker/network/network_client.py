"""NetworkClient: an asyncio connection from this broker to another one (Kafka's NetworkClient).

Replica fetchers and the AlterPartition sender run on the broker's event loop; each owns one
client and sends one request at a time, as Kafka's fetcher threads do (NetworkClients keeps one
such client per destination for callers whose coroutines send concurrently). A failed or timed-out
exchange closes the connection, so the next request starts on a fresh one and a late answer
can never be taken for the next request's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from typing import Any

from broker.security.client_security import PLAINTEXT, ClientSecurity
from protocol.framing import decode_response, encode_request

log = logging.getLogger(__name__)

_SIZE_BYTES = 4
# What a failed exchange raises: connection trouble, a peer that hung up, a timeout, an
# answer that does not decode (ProtocolError is a ValueError).
NETWORK_ERRORS = (OSError, EOFError, asyncio.TimeoutError, ValueError)


class NetworkClient:
    def __init__(self, client_id: str, timeout_s: float, security: ClientSecurity = PLAINTEXT) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._endpoint: tuple[str, int] | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def send(self, endpoint: tuple[str, int], body: Any, api_key: int, version: int) -> Any:
        """Send ``body`` to ``endpoint`` and return the decoded response body.

        Raises one of ``NETWORK_ERRORS``; the connection is closed in every failure case.
        """
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
            # that lands as the exchange completes (CPython gh-86296), and the owner's shutdown,
            # which cancels and awaits this task, would then wait forever.
            async with asyncio.timeout(self.timeout_s):
                return await self._exchange(endpoint, body, api_key, version)
        except BaseException:
            self.close()
            raise

    async def _exchange(self, endpoint: tuple[str, int], body: Any, api_key: int, version: int) -> Any:
        if self._writer is None or self._endpoint != endpoint:
            self.close()
            self._reader, self._writer = await self.security.open_connection(*endpoint, self.client_id)
            self._endpoint = endpoint
        assert self._reader is not None and self._writer is not None
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        self._writer.write(encode_request(body, api_key, version, self._correlation_id, self.client_id))
        size = int.from_bytes(await self._reader.readexactly(_SIZE_BYTES), "big", signed=True)
        if size < 0:
            raise ValueError(f"invalid response size {size} from {endpoint}")
        correlation_id, response = decode_response(api_key, version, await self._reader.readexactly(size))
        if correlation_id != self._correlation_id:
            raise ValueError(f"correlation id {correlation_id} from {endpoint}, expected {self._correlation_id}")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
        self._endpoint = None


class NetworkClients:
    """One NetworkClient per destination, each exchanging one request at a time, for callers whose
    coroutines send concurrently (the share-group state persister, the consumer-lag metrics). A
    NetworkClient shared by concurrent exchanges breaks them: a second reader on its stream raises
    RuntimeError, and a send to another endpoint closes the connection the first is waiting on."""

    def __init__(self, client_id: str, timeout_s: float, security: ClientSecurity = PLAINTEXT) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._clients: dict[Hashable, tuple[NetworkClient, asyncio.Lock]] = {}

    async def send(self, destination: Hashable, endpoint: tuple[str, int], body: Any, api_key: int,
                   version: int) -> Any:
        """NetworkClient.send on ``destination``'s client, after any exchange in flight on it."""
        found = self._clients.get(destination)
        if found is None:
            found = self._clients[destination] = (NetworkClient(self.client_id, self.timeout_s, self.security),
                                                  asyncio.Lock())
        client, lock = found
        async with lock:
            return await client.send(endpoint, body, api_key, version)

    def close(self) -> None:
        for client, _lock in self._clients.values():
            client.close()
        self._clients.clear()
