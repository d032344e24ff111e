"""Fixtures of the fault-injection suite; its options (--soak, --faults-broker, --faults-results)
are declared in tests/conftest.py.

Without ``--soak`` the short default schedule runs (the soak test is deselected); with it only the
soak runs. Each run writes ``DIR/<broker>-<schedule>[-part].json`` and ``.md``; at the end of the
session the parts of a schedule are merged into ``DIR/<broker>-<schedule>.json`` and its table printed.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.results import Report
from tests.faults.runner import Runner

SOAK_TESTS = ("test_soak",)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_started] = time.time()


_started = pytest.StashKey[float]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    soaking = config.getoption("--soak") is not None
    here = Path(__file__).parent
    keep, drop = [], []
    for item in items:
        if Path(str(item.fspath)).parent != here or item.name.startswith("test_checker"):
            keep.append(item)
        elif (item.originalname in SOAK_TESTS) == soaking:
            keep.append(item)
            if soaking:  # the soak's own length plus a bound for the last round
                item.add_marker(pytest.mark.timeout(int(config.getoption("--soak") * 60) + 900))
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Merge the parts this session wrote and print each schedule's table (xdist: in the controller)."""
    directory: Path = config.getoption("--faults-results")
    if hasattr(config, "workerinput") or not directory.is_dir():
        return
    started = config.stash.get(_started, 0.0)
    parts: dict[str, list[Report]] = {}
    for path in sorted(directory.glob("*-part*.json")):
        if path.stat().st_mtime >= started:
            parts.setdefault(path.name.split("-part")[0], []).append(Report.read(path))
    for name, reports in parts.items():
        merged = Report.merge(reports)
        merged.write(directory / f"{name}.json")
        terminalreporter.write_sep("=", f"fault injection: {name} ({directory / name}.md)")
        terminalreporter.write_line(merged.summary())


@pytest.fixture
def fault_run(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Runner]]:
    """``fault_run(part_name)``: a started ``FaultCluster`` (ours or Kafka's, per --faults-broker)
    with a ``Runner`` whose report is written to the results dir however the test ends; everything
    the cluster made (namespaces, mounts, processes) is removed afterwards."""
    from tests.faults.cluster import FaultCluster
    from tests.faults.netns import netns_unavailable_reason
    from tests.harness.kafka_cli import kafka_cli_unavailable_reason
    from tests.harness.zookeeper import zookeeper_unavailable_reason

    for reason in (netns_unavailable_reason(), zookeeper_unavailable_reason(), kafka_cli_unavailable_reason()):
        if reason:
            pytest.skip(reason)
    broker = request.config.getoption("--faults-broker")
    directory: Path = request.config.getoption("--faults-results")
    made: list[tuple[FaultCluster, Runner, str]] = []

    def start(part: str) -> Runner:
        cluster = FaultCluster(tmp_path, broker)
        report = Report("Kafka 3.9" if broker == "kafka" else "ours", part.split("-part")[0])
        runner = Runner(cluster, tmp_path, report, share=request.config.getoption("--faults-share"))
        made.append((cluster, runner, part))
        cluster.start()
        return runner

    yield start
    for cluster, runner, part in made:
        try:
            runner.report.write(directory / f"{broker}-{part}.json")
            print(runner.report.summary())
            if _failed(request):
                print(cluster.log_tails())
        finally:
            cluster.close()


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is None or report.failed
