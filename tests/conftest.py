"""Fixtures every test folder may use."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.spark.segment_files import Expected, write_log_dir

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden-logs"


def pytest_configure(config: pytest.Config) -> None:
    """Every Spark driver a test starts (in-process sessions, ``python -m spark_jobs...``,
    spark-submit) gets the test JVM options through spark-submit's SPARK_SUBMIT_OPTS."""
    from tests.harness.spark_cluster import SPARK_TEST_JVM_OPTS

    os.environ.setdefault("SPARK_SUBMIT_OPTS", SPARK_TEST_JVM_OPTS)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Options of the fault-injection suite (tests/faults), declared here where pytest reads them
    whichever folder it is given."""
    group = parser.getgroup("faults", "fault-injection suite (tests/faults)")
    group.addoption("--soak", type=float, default=None, metavar="MINUTES",
                    help="run mixed faults for MINUTES instead of the short default schedule")
    group.addoption("--faults-broker", choices=("ours", "kafka"), default="ours",
                    help="run the faults against our broker or Apache Kafka 3.9 from ../shared/kafka-cli")
    group.addoption("--faults-share", action="store_true",
                    help="add the KIP-932 share-group workload to every round on our broker (opt-in until full "
                         "runs under load show that every share-partition starts: docs/fault-injection.md)")
    group.addoption("--faults-results", type=Path, default=Path(__file__).resolve().parents[1] / "build" / "faults",
                    metavar="DIR", help="where the fault runs write their results tables (default build/faults)")


# The xdist groups (see _xdist_group) and modules of a minute or more of test time on a loaded
# machine, longest first (measured with --junitxml), handed out first: started last, one of them
# would keep a worker busy alone at the end while the others sit idle. scripts/test.sh passes
# --no-loadscope-reorder, so this order holds (xdist would otherwise order groups by test count).
LONG_FIRST = (
    "tests/integration/spark",
    "tests/integration/kafka_tools",
    "tests/faults/test_schedule.py",
    "tests/integration/docs/test_readme_quickstart.py",
    "tests/integration/mixed/test_mixed_replication.py",
    "tests/integration/spark/test_spark_submit.py",
    "tests/integration/mixed/test_mixed_controller.py",
    "tests/integration/security/test_oauthbearer.py",
    "tests/integration/groups/test_consumer_protocol_failover.py",
    "tests/integration/mixed/test_mixed_rolling_upgrade.py",
    "tests/integration/replication/test_jbod_cluster.py",
    "tests/integration/security/test_zookeeper_sasl.py",
    "tests/integration/replication/test_durability.py",
    "tests/integration/security/test_delegation_tokens.py",
    "tests/integration/transactions/test_exactly_once_cluster.py",
    "tests/integration/cleaner/test_compaction_kafka_compat.py",
    "tests/integration/security/test_dynamic_ssl.py",
)


def _xdist_groups(items: list[pytest.Item]) -> dict[pytest.Item, str]:
    """The xdist group of each test that has one. A test using a package-scoped fixture (the
    Kafka tools' brokers, the Spark session) takes its package, and so does every other test of
    its module (a module fixture of theirs then also runs once); a test using a module-scoped one
    (a cluster, a streamed run) takes its module. ``--dist loadgroup`` (scripts/test.sh) runs a
    group on one worker, one test after the other, so such a fixture is set up once: spread over
    the workers and interleaved with other tests, it was set up on each worker and again each time
    a worker came back to it."""
    groups: dict[pytest.Item, str] = {}
    module_package: dict[str, str] = {}
    for item in items:
        definitions = getattr(item, "_fixtureinfo", None)
        if definitions is None:
            continue
        scoped = [d for defs in definitions.name2fixturedefs.values() for d in defs]
        package = next((d.baseid for d in scoped if d.scope == "package"), None)
        if package:
            module_package[_module(item)] = package
        if package or any(d.scope == "module" for d in scoped):
            groups[item] = _module(item)
    for item in items:
        if _module(item) in module_package:
            groups[item] = module_package[_module(item)]
    return groups


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's xdist group as its marker (before xdist reads the markers), then the order: the
    groups and modules of LONG_FIRST first, in its order, the rest as collected; xdist hands them
    out in that order, and the short tests then fill the workers until the end."""
    groups = _xdist_groups(items)
    for item, group in groups.items():
        item.add_marker(pytest.mark.xdist_group(group))
    rank = {scope: i for i, scope in enumerate(LONG_FIRST)}

    def scope_rank(item: pytest.Item) -> int:
        return min(rank.get(groups.get(item, _module(item)), len(rank)), rank.get(_module(item), len(rank)))

    items.sort(key=scope_rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """``item.rep_setup`` / ``rep_call`` / ``rep_teardown``: fixtures print logs when the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def golden() -> Path:
    """Segment files written by real Kafka brokers (../shared/golden-logs)."""
    if not GOLDEN.is_dir():
        pytest.skip(f"golden logs not found at {GOLDEN} (../shared is absent)")
    return GOLDEN


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Expected]]:
    """A broker log dir written through storage.log.Log (every codec, legacy messages,
    transactions, several segments), and every data record in it."""
    path = tmp_path_factory.mktemp("kafka-logs")
    return path, write_log_dir(str(path))
