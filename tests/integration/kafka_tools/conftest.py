"""One broker of ours and one real Kafka 3.9 broker for the whole package (each on its own
ZooKeeper chroot of the shared ZooKeeper); tests use their own topic and group names, so they
do not disturb each other. Skips, saying why, without Kafka's tools or Java."""
from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli, kafka_cli
from tests.harness.kafka_broker import KAFKA_TEST_DEFAULTS, KafkaJavaBroker
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.kafka_tools.tool_support import SideBySide


@pytest.fixture(scope="package")
def cli(tmp_path_factory: pytest.TempPathFactory) -> KafkaCli:
    return kafka_cli(tmp_path_factory.mktemp("kafka-cli"))


def _chroot(zookeeper: ZooKeeperServer, name: str) -> str:
    return zookeeper.connect_string_with_chroot(f"{name}-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="package")
def ours(cli: KafkaCli, shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[BrokerProcess]:
    # The same server.properties as Kafka's side (but for addresses and directories).
    broker = BrokerProcess(_chroot(shared_zookeeper, "ours"), 0, tmp_path_factory.mktemp("ours"), KAFKA_TEST_DEFAULTS)
    yield from _running(broker)


@pytest.fixture(scope="package")
def kafka(cli: KafkaCli, shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[KafkaJavaBroker]:
    broker = KafkaJavaBroker(_chroot(shared_zookeeper, "kafka"), 0, tmp_path_factory.mktemp("kafka"))
    yield from _running(broker)


def _running(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="package")
def sides(cli: KafkaCli, ours: BrokerProcess, kafka: KafkaJavaBroker) -> SideBySide:
    return SideBySide(cli, [ours], [kafka])
