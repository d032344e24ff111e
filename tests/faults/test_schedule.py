"""The short default schedule: every fault once, in two halves that run on separate clusters (and,
under xdist, on separate workers). Every acknowledged write must survive, no idempotent write may
be doubled, and every other checker must pass; the cluster must heal after each fault."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.faults.nemesis import default_schedule
from tests.faults.runner import Runner

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]

HALVES = {"part1": [n.name for n in default_schedule()[0::2]], "part2": [n.name for n in default_schedule()[1::2]]}


@pytest.mark.parametrize("part", sorted(HALVES))
def test_default_schedule(part: str, fault_run: Callable[[str], Runner]) -> None:
    runner = fault_run(f"default-{part}")
    runner.run([n for n in default_schedule() if n.name in HALVES[part]])
    report = runner.report
    # java, confluent (classic, and on ours the consumer protocol, with --faults-share a share group), txn
    workloads = 3 + runner.consumer_protocol + runner.share
    assert len(report.cells) == workloads * len(HALVES[part])
    assert all(cell.acknowledged > 0 for cell in report.cells if cell.supported), report.summary()
    assert not report.violations(), report.summary()
