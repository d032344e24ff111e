"""A secure broker shared by a test module: PLAINTEXT (harness), SSL, SASL_PLAINTEXT and SASL_SSL."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.certs import TestPki
from tests.integration.security.security_setup import SECURE_LISTENERS, create_scram_users, secure_broker_overrides


@dataclass
class SecureBroker:
    broker: BrokerProcess
    pki: TestPki
    zk_connect: str

    def bootstrap(self, listener: str) -> str:
        return self.broker.bootstrap_for(listener)


def start_secure_broker(shared_zookeeper, directory, extra: dict[str, str] | None = None) -> SecureBroker:
    zk_connect = shared_zookeeper.connect_string_with_chroot(f"secure-{uuid.uuid4().hex[:8]}")
    pki = TestPki(directory / "pki")
    create_scram_users(zk_connect)
    overrides = {**secure_broker_overrides(pki, pki.issue("broker", "CN=localhost,OU=Brokers").pem_bundle),
                 **(extra or {})}
    broker = BrokerProcess(zk_connect, 0, directory, overrides, extra_listeners=SECURE_LISTENERS)
    broker.start()
    return SecureBroker(broker, pki, zk_connect)


@pytest.fixture(scope="module")
def secure_broker(shared_zookeeper, tmp_path_factory, request) -> Iterator[SecureBroker]:
    extra = getattr(request.module, "BROKER_SETTINGS", None)
    created = start_secure_broker(shared_zookeeper, tmp_path_factory.mktemp("secure-broker"), extra)
    try:
        yield created
    finally:
        created.broker.stop()
        if request.session.testsfailed:
            print(f"--- broker log ---\n{created.broker.log_tail(150)}")
