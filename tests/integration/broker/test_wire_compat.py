"""Answers that differed from Kafka 3.9's on the wire, each checked against one shared broker.

Every expectation here was taken from a real Kafka 3.9 broker given the same request (raw requests
where the exact bytes matter, real clients where a client's behaviour depends on the answer).
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    AlterPartitionRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    IncrementalAlterConfigsRequest,
    LeaderAndIsrRequest,
    MetadataRequest,
)
from protocol.schema import ZERO_UUID
from tests.harness.broker import BrokerProcess

pytestmark = pytest.mark.integration

MetadataTopic = MetadataRequest.MetadataRequestTopic
TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
                      AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}


def _bits(operations: set[AclOperation]) -> int:
    return sum(1 << op.value for op in operations)


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"w-{uuid.uuid4().hex[:10]}"
    broker.create_topic(name, partitions)
    return name


# --- Metadata ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [10, 11])
def test_metadata_topic_without_name_before_v12_is_an_invalid_request_on_an_open_connection(
        module_broker: BrokerProcess, version: int) -> None:
    topic = _topic(module_broker)
    with module_broker.connect() as connection:
        nameless = connection.request(ApiKey.METADATA, version, MetadataRequest(topics=[MetadataTopic(name=None)]))
        assert [(t.name, t.error_code, t.partitions) for t in nameless.topics] == [("", Errors.INVALID_REQUEST, [])]
        assert (nameless.brokers, nameless.cluster_id, nameless.controller_id) == ([], None, -1)
        with_id = connection.request(ApiKey.METADATA, version, MetadataRequest(
            topics=[MetadataTopic(name=topic, topic_id=uuid.uuid4())]))
        assert [(t.name, t.error_code) for t in with_id.topics] == [(topic, Errors.INVALID_REQUEST)]
        fine = connection.request(ApiKey.METADATA, version, MetadataRequest(topics=[MetadataTopic(name=topic)]))
        assert [(t.name, t.error_code) for t in fine.topics] == [(topic, 0)]


def test_metadata_v12_looks_topics_up_by_id_when_any_id_is_given(module_broker: BrokerProcess) -> None:
    topic = _topic(module_broker)
    topic_id = module_broker.metadata([topic]).topics[0].topic_id
    unknown_id = uuid.uuid4()
    response = module_broker.request(ApiKey.METADATA, 12, MetadataRequest(topics=[
        MetadataTopic(name="ignored-when-ids-are-given", topic_id=unknown_id), MetadataTopic(topic_id=topic_id)]))
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == \
        [(None, unknown_id, Errors.UNKNOWN_TOPIC_ID), (topic, topic_id, 0)]
    nameless = module_broker.request(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataTopic(name=None)]))
    assert [(t.name, t.topic_id, t.error_code) for t in nameless.topics] == \
        [("", ZERO_UUID, Errors.UNKNOWN_SERVER_ERROR)]


def test_metadata_answers_each_topic_once(module_broker: BrokerProcess) -> None:
    topic = _topic(module_broker)
    request = MetadataRequest(topics=[MetadataTopic(name=topic), MetadataTopic(name="no-such-w"),
                                      MetadataTopic(name=topic)], allow_auto_topic_creation=False)
    assert [t.name for t in module_broker.request(ApiKey.METADATA, 12, request).topics] == [topic, "no-such-w"]


# --- authorized operations (no authorizer: every operation that applies) -------------------------

def test_admin_client_sees_all_topic_and_cluster_operations(module_broker: BrokerProcess) -> None:
    topic = _topic(module_broker)
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                      request_timeout=15)[topic].result(20)
    assert set(described.authorized_operations) == TOPIC_OPERATIONS
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=15).result(20)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_authorized_operations_only_when_asked(module_broker: BrokerProcess, version: int) -> None:
    topic = _topic(module_broker)
    asking: dict[str, Any] = {"include_topic_authorized_operations": True, "allow_auto_topic_creation": False}
    if version <= 10:
        asking["include_cluster_authorized_operations"] = True
    names = [MetadataTopic(name=topic), MetadataTopic(name="absent-w")]
    asked = module_broker.request(ApiKey.METADATA, version, MetadataRequest(topics=names, **asking))
    assert [(t.error_code, t.topic_authorized_operations) for t in asked.topics] == \
        [(0, _bits(TOPIC_OPERATIONS)), (Errors.UNKNOWN_TOPIC_OR_PARTITION, _bits(TOPIC_OPERATIONS))]
    assert asked.cluster_authorized_operations == (_bits(CLUSTER_OPERATIONS) if version <= 10 else -(2**31))
    plain = module_broker.request(ApiKey.METADATA, version, MetadataRequest(topics=names[:1]))
    assert plain.topics[0].topic_authorized_operations == plain.cluster_authorized_operations == -(2**31)
    cluster = module_broker.request(ApiKey.DESCRIBE_CLUSTER, 0,
                                    DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert cluster.cluster_authorized_operations == _bits(CLUSTER_OPERATIONS)


def test_describe_groups_fills_operations_only_for_groups_it_describes(module_broker: BrokerProcess) -> None:
    response = module_broker.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
        groups=["never-used-w"], include_authorized_operations=True), timeout=30)
    group = response.groups[0]
    if group.error_code == 0:
        assert (group.group_state, group.authorized_operations) == ("Dead", _bits(
            {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}))
    else:  # the offsets topic was still being created: Kafka leaves the field out then
        assert group.authorized_operations == -(2**31)


# --- admin requests --------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 4, 5, 7])
def test_create_topics_has_no_error_message_for_a_created_topic(module_broker: BrokerProcess, version: int) -> None:
    request = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
        name=f"ct-{uuid.uuid4().hex[:8]}", num_partitions=1, replication_factor=1)])
    [result] = module_broker.request(ApiKey.CREATE_TOPICS, version, request, timeout=15).topics
    assert (result.error_code, result.error_message) == (0, None)


def test_partition_counts_no_zookeeper_node_can_hold_are_refused_at_once(module_broker: BrokerProcess) -> None:
    topic = _topic(module_broker)
    grow = CreatePartitionsRequest(timeout_ms=1000, validate_only=True, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=2**31 - 1, assignments=None)])
    [result] = module_broker.request(ApiKey.CREATE_PARTITIONS, 3, grow).results
    assert result.error_code == Errors.INVALID_PARTITIONS
    create = CreateTopicsRequest(timeout_ms=1000, validate_only=True, topics=[CreateTopicsRequest.CreatableTopic(
        name=f"huge-{uuid.uuid4().hex[:8]}", num_partitions=2**31 - 1, replication_factor=1)])
    [created] = module_broker.request(ApiKey.CREATE_TOPICS, 7, create).topics
    assert created.error_code == Errors.INVALID_PARTITIONS
    assert module_broker.metadata([topic]).topics[0].partitions  # and the broker is still responsive


def test_alter_partition_with_an_unknown_leader_recovery_state_fails_that_request_only(
        module_broker: BrokerProcess) -> None:
    from coordination.kafka_zk_client import KafkaZkClient

    topic = _topic(module_broker)
    zk = KafkaZkClient.connect(module_broker.zk_connect, 10000)
    try:
        info = zk.get_broker_info(0)
    finally:
        zk.close()
    assert info is not None
    # the live broker epoch: any other is STALE_BROKER_EPOCH before the partitions are read
    request = AlterPartitionRequest(broker_id=0, broker_epoch=info.epoch, topics=[AlterPartitionRequest.TopicData(
        topic_name=topic, partitions=[AlterPartitionRequest.PartitionData(
            partition_index=0, new_isr=[0], leader_recovery_state=-128)])])
    with module_broker.connect() as connection:
        assert connection.request(ApiKey.ALTER_PARTITION, 1, request).error_code == Errors.UNKNOWN_SERVER_ERROR
        assert connection.request(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataTopic(name=topic)])).topics


def test_leader_and_isr_for_an_illegal_topic_name_fails_without_touching_the_disk(
        module_broker: BrokerProcess) -> None:
    from coordination.kafka_zk_client import KafkaZkClient

    zk = KafkaZkClient.connect(module_broker.zk_connect, 10000)
    try:
        epoch = zk.get_controller_epoch()
    finally:
        zk.close()
    assert epoch is not None
    L = LeaderAndIsrRequest
    request = L(controller_id=0, controller_epoch=epoch[0], broker_epoch=-1, topic_states=[L.LeaderAndIsrTopicState(
        topic_name="../escaped", partition_states=[L.LeaderAndIsrPartitionState(
            partition_index=0, controller_epoch=epoch[0], leader=0, leader_epoch=1, isr=[0], replicas=[0])])])
    response = module_broker.request(ApiKey.LEADER_AND_ISR, 5, request)
    assert response.error_code == Errors.UNKNOWN_SERVER_ERROR  # as Kafka answers
    assert [e.error_code for t in response.topics for e in t.partition_errors] == [Errors.UNKNOWN_SERVER_ERROR]
    assert not (module_broker.log_dir.parent / "escaped-0").exists()


# --- configs -----------------------------------------------------------------------------------------

def test_deprecated_message_format_version_is_accepted_as_kafka_3_accepts_it(module_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    topic = f"mfv-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1, config={"message.format.version": "0.10.0.0"})])[topic].result(20)
    for value in ("0.10.0", "2.8.1.7", "3.9-IV0"):  # extra segments are ignored, as Kafka's parser does
        resource = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("message.format.version", value, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(20)
        described = admin.describe_configs([ConfigResource("topic", topic)])
        assert next(iter(described.values())).result(20)["message.format.version"].value == value
    invalid = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=topic, configs=[IncrementalAlterConfigsRequest.AlterableConfig(
            name="message.format.version", config_operation=0, value="9.9")])])
    [result] = module_broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, invalid).responses
    assert result.error_code == Errors.INVALID_CONFIG  # Kafka: an invalid topic value is INVALID_CONFIG
    assert result.error_message.endswith("Invalid value 9.9 for configuration message.format.version: "
                                         "Version 9.9 is not a valid version")


def test_config_errors_and_documentation_as_kafka_answers_them(module_broker: BrokerProcess) -> None:
    I = IncrementalAlterConfigsRequest
    logger = I(validate_only=True, resources=[I.AlterConfigsResource(resource_type=8, resource_name="0", configs=[
        I.AlterableConfig(name="no.such.logger", config_operation=0, value="INFO")])])
    [result] = module_broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, logger).responses
    assert (result.error_code, result.error_message) == (Errors.INVALID_CONFIG, "Logger no.such.logger does not exist!")
    broker = I(validate_only=True, resources=[I.AlterConfigsResource(resource_type=4, resource_name="0", configs=[
        I.AlterableConfig(name="log.cleaner.threads", config_operation=0, value="abc")])])
    [result] = module_broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, broker).responses
    assert result.error_code == Errors.INVALID_REQUEST
    assert result.error_message.startswith("Invalid value abc for configuration log.cleaner.threads")
    topic = _topic(module_broker)
    D = DescribeConfigsRequest
    described = module_broker.request(ApiKey.DESCRIBE_CONFIGS, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=2, resource_name=topic, configuration_keys=["retention.ms"])], include_documentation=False))
    assert [c.documentation for c in described.results[0].configs] == [None]
