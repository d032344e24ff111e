"""Free TCP ports for servers started by tests.

Binding to port 0 and closing races with other processes, so ports are additionally reserved per
pytest-xdist worker: each worker only hands out ports from its own slice of the ephemeral-free
range below the kernel's ephemeral range, and not the same port twice within a process until the
slice is used up. Within the slice the choice is random: other test runs on the machine (another
checkout's, or a run without xdist, which uses the first slice) pick from the same slice, and a
server takes seconds to bind on a busy machine. Walking the slice in order, two processes that met
on one port met again on the next (a cluster's brokers take consecutive picks), retry after retry.
"""
from __future__ import annotations

import os
import random
import socket
import threading

_RANGE_START = 20000
_RANGE_END = 32000
_SLICE = 500

_lock = threading.Lock()
_handed_out: set[int] = set()
_choice = random.SystemRandom()  # nothing shared with other processes, not even a seed


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = "".join(ch for ch in worker if ch.isdigit())
    return int(digits) if digits else 0


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that is free now and not handed out before by this process (until all
    of its slice have been)."""
    slices = (_RANGE_END - _RANGE_START) // _SLICE
    base = _RANGE_START + (_worker_index() % slices) * _SLICE
    with _lock:
        for _ in range(2):
            unused = [port for port in range(base, base + _SLICE) if port not in _handed_out]
            _choice.shuffle(unused)
            for port in unused:
                if _is_free(port):
                    _handed_out.add(port)
                    return port
            _handed_out.clear()  # every port handed out once: start over
    raise RuntimeError(f"no free port left in [{base}, {base + _SLICE})")
