"""Fixtures for the network layer's integration tests."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.network.request_handler import RequestHandler
from network_harness import ServerThread


@pytest.fixture
def network_server() -> Iterator[Callable[..., ServerThread]]:
    """Factory: ``network_server(handler, **{"config.key": value})``; always stopped."""
    started: list[ServerThread] = []

    def start(handler: RequestHandler, **overrides: Any) -> ServerThread:
        server = ServerThread(handler, {k.replace("_", "."): v for k, v in overrides.items()})
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
