"""Waiting in tests for something another process or thread will do."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str = "condition", timeout: float = 30.0,
             interval: float = 0.05) -> T:
    """Poll until ``condition()`` is truthy and return that value; fail the test naming ``what``
    after ``timeout`` seconds. Connection errors (a broker restarting) count as not yet."""
    deadline = time.monotonic() + timeout
    last_error: OSError | None = None
    while True:
        try:
            result = condition()
        except OSError as exc:
            last_error, result = exc, None
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(interval)


async def wait_until(condition: Callable[[], object], what: str = "condition", timeout: float = 30.0,
                     interval: float = 0.005) -> None:
    """``wait_for`` inside an event loop, for what the loop's own tasks will do: the bound is
    generous because a loaded machine can be slow, and a condition that holds returns at once."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)
