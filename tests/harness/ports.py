"""Free TCP ports for servers started by tests.

Binding to port 0 and closing races with other processes, so ports are additionally reserved per
pytest-xdist worker: each worker only hands out ports from its own slice of the ephemeral-free
range below the kernel's ephemeral range, and never the same port twice within a process.
"""
from __future__ import annotations

import os
import socket
import threading

_RANGE_START = 20000
_RANGE_END = 32000
_SLICE = 500

_lock = threading.Lock()
_next_offset = 0


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
    """A port on 127.0.0.1 that is free now and not handed out before by this process."""
    global _next_offset
    slices = (_RANGE_END - _RANGE_START) // _SLICE
    base = _RANGE_START + (_worker_index() % slices) * _SLICE
    # Mix in the pid so that two sequential pytest runs on the same worker id don't collide with a
    # lingering server of the previous run.
    start = (os.getpid() * 7) % _SLICE
    with _lock:
        for _ in range(_SLICE):
            port = base + (start + _next_offset) % _SLICE
            _next_offset += 1
            if _is_free(port):
                return port
    raise RuntimeError(f"no free port left in [{base}, {base + _SLICE})")
