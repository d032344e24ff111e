"""PollingThreadingHandler.select keeps the contract kazoo's connection loop relies on."""

from __future__ import annotations

import os
import socket

import pytest

from coordination.polling_handler import PollingThreadingHandler


def test_ready_objects_come_back_readable_first_and_a_timeout_returns_nothing() -> None:
    handler = PollingThreadingHandler()
    a, b = socket.socketpair()
    try:
        assert handler.select([a], [], [], 0.01) == ([], [], [])
        assert handler.select([], [a], [], 0) == ([], [a], [])
        b.send(b"x")
        assert handler.select([a], [], [], 1) == ([a], [], [])
        assert handler.select([a], [b], [], 1) == ([a], [b], [])
        assert handler.select([a.fileno()], [], [], 1) == ([a.fileno()], [], [])
    finally:
        a.close()
        b.close()


def test_a_closed_peer_counts_as_readable() -> None:
    handler = PollingThreadingHandler()
    a, b = socket.socketpair()
    b.close()
    try:
        assert handler.select([a], [], [], 1) == ([a], [], [])
    finally:
        a.close()


def test_invalid_descriptors_and_timeouts_are_value_errors() -> None:
    handler = PollingThreadingHandler()
    closed = socket.socket()
    closed.close()
    with pytest.raises(ValueError):
        handler.select([closed], [], [], 0)
    a, b = socket.socketpair()
    fd = a.detach()
    os.close(fd)
    with pytest.raises(ValueError):
        handler.select([fd], [], [], 0)
    with pytest.raises(ValueError):
        handler.select([b], [], [], -1)
    b.close()
