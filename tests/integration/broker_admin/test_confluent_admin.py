"""Admin APIs against a real broker through confluent-kafka's AdminClient (librdkafka)."""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaProducer

from tests.harness.broker import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    # Quiet: the client outlives the broker at teardown and would log reconnect failures.
    yield AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})


def _error(future: object) -> int | None:
    try:
        future.result(timeout=30)  # type: ignore[attr-defined]
    except KafkaException as exc:
        return exc.args[0].code()
    return None


def _create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict[str, int | None]:
    futures = admin.create_topics(list(topics), operation_timeout=15, validate_only=validate_only)
    return {name: _error(f) for name, f in futures.items()}


def test_create_and_delete_topics_with_validate_only(admin: AdminClient, broker: BrokerProcess) -> None:
    assert _create(admin, NewTopic("vo", 2, 1), validate_only=True) == {"vo": None}
    assert broker.metadata(["vo"]).topics[0].error_code == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _create(admin, NewTopic("real", 2, 1), NewTopic("bad/name", 1, 1), NewTopic("rf", 1, 2)) == {
        "real": None,
        "bad/name": KafkaError.TOPIC_EXCEPTION,
        "rf": KafkaError.INVALID_REPLICATION_FACTOR,
    }
    assert _create(admin, NewTopic("real", 2, 1)) == {"real": KafkaError.TOPIC_ALREADY_EXISTS}
    assert len(broker.metadata(["real"]).topics[0].partitions) == 2
    futures = admin.delete_topics(["real", "never-existed"], operation_timeout=15)
    assert {t: _error(f) for t, f in futures.items()} == {
        "real": None, "never-existed": KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    assert broker.metadata(["real"]).topics[0].error_code == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_invalid_configs_get_invalid_config(admin: AdminClient) -> None:
    assert _create(
        admin,
        NewTopic("c1", 1, 1, config={"retention.ms": "-7"}),
        NewTopic("c2", 1, 1, config={"cleanup.policy": "shred"}),
        NewTopic("c3", 1, 1, config={"segment.byte": "1000"}),
    ) == {"c1": KafkaError.INVALID_CONFIG, "c2": KafkaError.INVALID_CONFIG, "c3": KafkaError.INVALID_CONFIG}


def test_incremental_alter_configs_topic_and_broker(admin: AdminClient) -> None:
    assert _create(admin, NewTopic("inc", 1, 1)) == {"inc": None}
    topic = ConfigResource("topic", "inc", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    assert [_error(f) for f in admin.incremental_alter_configs([topic]).values()] == [None]
    (described,) = admin.describe_configs([ConfigResource("topic", "inc")]).values()
    configs = described.result(timeout=30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"

    broker = ConfigResource("broker", "0", incremental_configs=[
        ConfigEntry("log.retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
    ])
    assert [_error(f) for f in admin.incremental_alter_configs([broker]).values()] == [None]

    def described_broker_entry():
        (described,) = admin.describe_configs([ConfigResource("broker", "0")]).values()
        return described.result(timeout=30)["log.retention.bytes"]

    # As in Kafka, the broker applies its dynamic config when the ZooKeeper change
    # notification reaches it, so DescribeConfigs shows the new value shortly after.
    deadline = time.monotonic() + 15
    while (entry := described_broker_entry()).value != "1000000" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (entry.value, entry.source, entry.is_read_only) == ("1000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)

    static = ConfigResource("broker", "0", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET),
    ])
    assert [_error(f) for f in admin.incremental_alter_configs([static]).values()] == [KafkaError.INVALID_REQUEST]
    unknown_topic = ConfigResource("topic", "absent", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
    ])
    assert [_error(f) for f in admin.incremental_alter_configs([unknown_topic]).values()] == [
        KafkaError.UNKNOWN_TOPIC_OR_PART
    ]


def test_describe_cluster(admin: AdminClient, broker: BrokerProcess) -> None:
    cluster = admin.describe_cluster(request_timeout=30).result(timeout=30)
    assert cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", broker.port)]
    assert cluster.cluster_id


def test_delete_records(admin: AdminClient, broker: BrokerProcess) -> None:
    assert _create(admin, NewTopic("records", 1, 1)) == {"records": None}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    try:
        for i in range(10):
            producer.send("records", f"v{i}".encode(), partition=0)
        producer.flush(30)
    finally:
        producer.close()
    (future,) = admin.delete_records([TopicPartition("records", 0, 4)]).values()
    assert future.result(timeout=30).low_watermark == 4
    (future,) = admin.delete_records([TopicPartition("records", 0, 11)]).values()
    assert _error(future) == KafkaError.OFFSET_OUT_OF_RANGE
    (future,) = admin.delete_records([TopicPartition("records", 0, -1)]).values()
    assert future.result(timeout=30).low_watermark == 10


def test_list_topics(admin: AdminClient) -> None:
    assert _create(admin, NewTopic("listed", 2, 1)) == {"listed": None}
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["listed"].partitions) == 2
