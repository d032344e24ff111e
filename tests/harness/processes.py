"""What every server process a test starts shares: it must not outlive the test run."""
from __future__ import annotations

import ctypes
import random
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

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


def run_until_killed(argv: Sequence[str], rng: random.Random, env: Mapping[str, str],
                     min_s: float, max_s: float) -> str:
    """Start ``argv``, wait for its ``ready ...`` line, SIGKILL it ``min_s``..``max_s`` seconds later;
    returns all it printed (for crash-safety tests, whose workers print their progress)."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env))
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().decode()
        assert ready.startswith("ready "), proc.stderr.read().decode() if proc.stderr else ready
        time.sleep(rng.uniform(min_s, max_s))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    return ready + out.decode()
