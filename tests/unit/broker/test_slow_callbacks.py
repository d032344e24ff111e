"""``python -m broker --slow-callback-ms MS``: callbacks that hold the event loop longer are logged."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest
import uvloop

from broker.__main__ import watch_slow_callbacks


def _run_on_uvloop(blocking_s: float, threshold_ms: float) -> None:
    async def main() -> None:
        watch_slow_callbacks(asyncio.get_running_loop(), threshold_ms)
        asyncio.get_running_loop().call_soon(time.sleep, blocking_s)
        await asyncio.sleep(0.05)

    uvloop.run(main())


def test_a_callback_over_the_threshold_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        _run_on_uvloop(0.03, 10)
    slow = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    assert len(slow) == 1 and "sleep" in slow[0], slow


def test_callbacks_under_the_threshold_are_not(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        _run_on_uvloop(0.001, 500)
    assert not [r for r in caplog.records if "took" in r.getMessage()]
