"""One broker per test module for the transaction tests that do not disturb each other; a three-broker
cluster per test for those that kill brokers."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.transactions.txn_helpers import unique


@pytest.fixture(scope="module")
def module_broker(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A broker with the module's ``BROKER_OVERRIDES``; its log is printed when its start fails."""
    process = BrokerProcess(shared_zookeeper.connect_string_with_chroot(unique("txn")), 0,
                            tmp_path_factory.mktemp("txn-broker"), getattr(request.module, "BROKER_OVERRIDES", {}))
    try:
        process.start()
        yield process
    except BaseException:
        print(f"--- broker log ---\n{process.log_tail(150)}")
        raise
    finally:
        process.stop()


@pytest.fixture
def cluster(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerCluster]:
    """Three brokers with the module's ``CLUSTER_OVERRIDES``, SIGKILLed at the end; their logs are
    printed when the test failed."""
    created = BrokerCluster(3, zk_connect, tmp_path, getattr(request.module, "CLUSTER_OVERRIDES", {}))
    try:
        created.start()
        yield created
    finally:
        created.kill()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for broker in created.brokers:
                print(f"--- broker {broker.broker_id} log ---\n{broker.log_tail(120)}")
