"""Wall-clock milliseconds, as Kafka's ``Time.milliseconds()``: one function, so a test can jump it.

The jump is test-only. When the broker's environment names a file in
``PYKAFKA_TEST_CLOCK_OFFSET_FILE``, SIGUSR2 makes it read a number of milliseconds from that file
and add it to every later reading (the fault-injection suite in ``tests/faults`` jumps a broker's
clock this way, since a network namespace cannot). Without that variable the offset stays 0.
"""
from __future__ import annotations

import logging
import time

TEST_CLOCK_OFFSET_FILE_ENV = "PYKAFKA_TEST_CLOCK_OFFSET_FILE"

log = logging.getLogger(__name__)
_offset_ms = 0


def now_ms() -> int:
    return int(time.time() * 1000) + _offset_ms


def apply_test_clock_offset(path: str) -> None:
    """Test hook: from now on, readings are off by the milliseconds written in ``path``."""
    global _offset_ms
    try:
        with open(path) as source:
            _offset_ms = int(source.read().strip() or 0)
    except (OSError, ValueError) as exc:
        log.warning("Test clock offset not applied from %s: %s", path, exc)
        return
    log.warning("Test clock offset is now %d ms", _offset_ms)
