"""``python -m broker --slow-callback-ms MS``: callbacks that hold the event loop longer are logged.

The loop reports every callback over the threshold, its own ones included (on a loaded machine
asyncio's internal callbacks can take longer than a small threshold), so the tests look for the
callbacks they scheduled by name and leave whatever else the loop reports alone.
"""
from __future__ import annotations

import asyncio
import logging
import time

import pytest
import uvloop

from broker.__main__ import watch_slow_callbacks


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)


def _return_at_once() -> None:
    pass


def _slow_reports(caplog: pytest.LogCaptureFixture, blocking_s: float, threshold_ms: float) -> list[str]:
    """What the loop reported as slow after running one blocking and one fast callback."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        watch_slow_callbacks(loop, threshold_ms)
        loop.call_soon(_hold_the_loop, blocking_s)
        loop.call_soon(_return_at_once)
        await asyncio.sleep(0)  # both run before main resumes: call_soon keeps order

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        uvloop.run(main())
    return [r.getMessage() for r in caplog.records if "took" in r.getMessage()]


def test_a_callback_over_the_threshold_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    slow = _slow_reports(caplog, blocking_s=0.03, threshold_ms=10)
    assert [m for m in slow if _hold_the_loop.__name__ in m], slow


def test_callbacks_under_the_threshold_are_not(caplog: pytest.LogCaptureFixture) -> None:
    # A threshold far above what an empty callback costs, even on a loaded machine; the blocking
    # callback over it shows the watch is on.
    slow = _slow_reports(caplog, blocking_s=0.6, threshold_ms=500)
    assert [m for m in slow if _hold_the_loop.__name__ in m], slow
    assert not [m for m in slow if _return_at_once.__name__ in m], slow
