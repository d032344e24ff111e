"""Admin APIs against a real broker through kafka-python's KafkaAdminClient."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from tests.harness.broker import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        yield client
    finally:
        client.close()


def _partition_count(broker: BrokerProcess, topic: str) -> int:
    (meta,) = broker.metadata([topic]).topics
    assert meta.error_code == 0
    return len(meta.partitions)


def test_create_topics_waits_for_leaders_and_rejects_duplicates(admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    admin.create_topics({"orders": {"num_partitions": 3, "replication_factor": 1,
                                    "configs": {"retention.ms": "60000"}}}, timeout_ms=15000)
    # Leaders were in the metadata cache before the response: no polling needed.
    (meta,) = broker.metadata(["orders"]).topics
    assert sorted(p.partition_index for p in meta.partitions) == [0, 1, 2]
    assert all(p.leader_id == 0 for p in meta.partitions)
    assert "orders" in admin.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({"orders": {"num_partitions": 1}}, timeout_ms=15000)


def test_create_topics_validate_only_creates_nothing(admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    admin.create_topics({"dry": {"num_partitions": 2}}, timeout_ms=15000, validate_only=True)
    assert "dry" not in admin.list_topics()


@pytest.mark.parametrize(
    ("name", "options", "error"),
    [
        ("bad name", {"num_partitions": 1}, InvalidTopicError),
        ("x" * 250, {"num_partitions": 1}, InvalidTopicError),
        ("..", {"num_partitions": 1}, InvalidTopicError),
        ("rf", {"num_partitions": 1, "replication_factor": 3}, InvalidReplicationFactorError),
        ("zero", {"num_partitions": 0, "replication_factor": 1}, InvalidPartitionsError),
        ("unknown-config", {"num_partitions": 1, "configs": {"no.such.config": "1"}}, InvalidConfigurationError),
        ("bad-value", {"num_partitions": 1, "configs": {"retention.ms": "soon"}}, InvalidConfigurationError),
        ("both", {"num_partitions": 1, "assignments": {0: [0]}}, InvalidRequestError),
    ],
)
def test_create_topics_errors(admin: KafkaAdminClient, name: str, options: dict, error: type) -> None:
    with pytest.raises(error):
        admin.create_topics({name: options}, timeout_ms=15000)


def test_dot_underscore_collision(admin: KafkaAdminClient) -> None:
    admin.create_topics({"a.b": {"num_partitions": 1}}, timeout_ms=15000)
    with pytest.raises(InvalidTopicError, match="collides"):
        admin.create_topics({"a_b": {"num_partitions": 1}}, timeout_ms=15000)


def test_create_partitions_increase_only(admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    admin.create_topics({"grow": {"num_partitions": 1}}, timeout_ms=15000)
    admin.create_partitions({"grow": NewPartitions(total_count=2)}, validate_only=True)
    assert _partition_count(broker, "grow") == 1
    admin.create_partitions({"grow": NewPartitions(total_count=3)}, timeout_ms=15000)
    assert _partition_count(broker, "grow") == 3
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"grow": NewPartitions(total_count=2)})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"grow": NewPartitions(total_count=3)})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"absent": NewPartitions(total_count=3)})


def test_delete_topics(admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    admin.create_topics({"doomed": {"num_partitions": 2}}, timeout_ms=15000)
    admin.delete_topics(["doomed"], timeout_ms=15000)
    # The deletion is visible in this broker's metadata when the response arrives.
    (meta,) = broker.metadata(["doomed"]).topics
    assert meta.error_code == UnknownTopicOrPartitionError.errno
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["doomed"], timeout_ms=15000)


def test_describe_and_alter_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics({"cfg": {"num_partitions": 1, "configs": {"retention.ms": "123456"}}}, timeout_ms=15000)
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg")], include_synonyms=True,
                                       config_filter="all")
    configs = described["topic"]["cfg"]
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["segment.bytes"]["value"] == "1073741824"
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg", configs={"cleanup.policy": "compact"})],
                        incremental=False)
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg")], config_filter="all")
    configs = described["topic"]["cfg"]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"


def test_incremental_alter_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics({"inc": {"num_partitions": 1, "configs": {"retention.ms": "123456"}}}, timeout_ms=15000)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "inc", configs={
        "cleanup.policy": ("APPEND", "compact"), "max.message.bytes": "2000000"})], incremental=True)
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "inc")], config_filter="all")["topic"]["inc"]
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    assert configs["max.message.bytes"]["value"] == "2000000"
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "inc", configs={
        "cleanup.policy": ("SUBTRACT", "delete"), "retention.ms": ("DELETE", None)})], incremental=True)
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "inc")], config_filter="all")["topic"]["inc"]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"]["value"] == "604800000"
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
