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
                    help="add the KIP-932 share-group workload to every round on our broker (a round can still "
                         "leave a share-partition never initialised: docs/fault-injection.md)")
    group.addoption("--faults-results", type=Path, default=Path(__file__).resolve().parents[1] / "build" / "faults",
                    metavar="DIR", help="where the fault runs write their results tables (default build/faults)")


# Modules with tests of 15 s or more (measured with --durations=0), scheduled first: started last,
# one of them would keep a worker busy alone at the end while the others sit idle.
LONG_FIRST = (
    "tests/faults/test_schedule.py",
    "tests/integration/spark/test_spark_streaming.py",
    "tests/integration/docs/test_readme_quickstart.py",
    "tests/integration/spark/test_spark_submit.py",
    "tests/integration/cleaner/test_compaction_kafka_compat.py",
    "tests/integration/kafka_tools/test_configs_tool.py",
    "tests/integration/transactions/test_exactly_once_cluster.py",
    "tests/integration/replication/test_durability.py",
    "tests/integration/mixed/test_mixed_controller.py",
    "tests/integration/test_storage_crash.py",
    "tests/integration/kafka_tools/test_offsets_tool.py",
    "tests/integration/test_cleaner_crash.py",
    "tests/integration/kafka_tools/test_transactions_tool.py",
    "tests/integration/kafka_tools/test_cluster_tools.py",
    "tests/integration/security/test_secure_clients.py",
    "tests/integration/groups/test_consumer_protocol_failover.py",
)


def pytest_itemcollected(item: pytest.Item) -> None:
    """A test using a module-scoped fixture (a cluster, a streamed run) joins its module's xdist
    group, so that ``--dist loadgroup`` (scripts/test.sh) runs the module on one worker and sets
    the fixture up once, instead of once on every worker its tests are spread over."""
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return
    if any(d.scope == "module" for defs in definitions.name2fixturedefs.values() for d in defs):
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long modules first (in LONG_FIRST's order), the rest as collected: xdist hands them out
    first (scripts/test.sh), and the short tests then fill the workers until the end."""
    rank = {path: i for i, path in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


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
