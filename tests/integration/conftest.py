"""Fixtures that start real external processes for integration tests."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.zookeeper import ZooKeeperServer, zookeeper_unavailable_reason


def _require_zookeeper() -> None:
    reason = zookeeper_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A fresh ZooKeeper server owned by this test (free to stop and restart it); always stopped."""
    _require_zookeeper()
    server = ZooKeeperServer(base_dir=tmp_path / "zookeeper")
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def shared_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper per test process, for tests that never stop it (isolated by chroot)."""
    _require_zookeeper()
    server = ZooKeeperServer(base_dir=tmp_path_factory.mktemp("shared-zookeeper"))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def zk_connect(shared_zookeeper: ZooKeeperServer) -> str:
    """A `zookeeper.connect` string with a chroot of its own on the shared server."""
    return shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}")


# --- brokers (tests/harness/broker.py) ---------------------------------------------------------

@pytest.fixture
def broker(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator["BrokerProcess"]:
    """One real broker with its own ZooKeeper chroot and log dir; its log is printed on failure."""
    from tests.harness.broker import BrokerProcess

    overrides = getattr(request, "param", None) or {}
    process = BrokerProcess(zk_connect, 0, tmp_path, overrides)
    try:
        process.start()
        yield process
    finally:
        failed = _failed(request)
        if failed:
            process.dump_threads_if_stuck()
        process.stop()
        if failed:
            print(f"--- broker log ({process.log_path}) ---\n{process.log_tail(200)}")


@pytest.fixture(scope="module")
def module_broker(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator["BrokerProcess"]:
    """One real broker shared by the tests of a module that do not disturb each other (its own
    chroot and log dir; overrides from the module's ``BROKER_OVERRIDES``); its log is printed when
    one of them failed."""
    from tests.harness.broker import BrokerProcess

    tmp = tmp_path_factory.mktemp("module-broker")
    process = BrokerProcess(shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}"), 0, tmp,
                            getattr(request.module, "BROKER_OVERRIDES", {}))
    try:
        process.start()
        yield process
    finally:
        if request.session.testsfailed:
            process.dump_threads_if_stuck()
        process.stop()
        if request.session.testsfailed:
            print(f"--- broker log ({process.log_path}) ---\n{process.log_tail(200)}")


@pytest.fixture
def cluster3(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator["BrokerCluster"]:
    """Three real brokers (ids 0, 1, 2) on one ZooKeeper chroot (broker settings: indirect parameter)."""
    from tests.harness.broker import BrokerCluster

    created = BrokerCluster(3, zk_connect, tmp_path, getattr(request, "param", None) or {})
    try:
        created.start()
        yield created
    finally:
        failed = _failed(request)
        if failed:
            for b in created.brokers:
                b.dump_threads_if_stuck()
        created.stop()
        if failed:
            for b in created.brokers:
                print(f"--- broker {b.broker_id} log ---\n{b.log_tail(100)}")


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is not None and report.failed
