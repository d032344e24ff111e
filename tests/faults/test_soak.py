"""``--soak MINUTES``: mixed faults (any kind, 5-30 s each, one per round) for that long on one
cluster, checked like the default schedule. Deselected without ``--soak``."""
from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tests.faults.runner import Runner, say, soak

pytestmark = pytest.mark.faults


def test_soak(fault_run: Callable[[str], Runner], request: pytest.FixtureRequest) -> None:
    minutes: float = request.config.getoption("--soak")
    seed = random.randrange(1 << 32)
    runner = fault_run("soak-part1")
    runner.report.schedule = f"soak {minutes:g} min (seed {seed})"
    say(f"soak for {minutes:g} minutes, seed {seed}")
    soak(runner, minutes, seed)
    report = runner.report
    assert report.cells and all(cell.acknowledged > 0 for cell in report.cells if cell.supported), report.summary()
    assert not report.violations(), report.summary()
