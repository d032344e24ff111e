"""One broker per test module for the transaction tests that do not disturb each other."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.broker import BrokerProcess
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
