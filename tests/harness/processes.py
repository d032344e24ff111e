"""What every server process a test starts shares: it must not outlive the test run."""
from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: fixtures still stop their servers on every normal exit
    _prctl = None


def die_with_parent() -> None:
    """A ``preexec_fn``: runs in the child between fork and exec (so: no imports, no locks) and
    asks Linux to SIGTERM it when the test process dies, so a killed pytest run never leaves
    servers behind."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
