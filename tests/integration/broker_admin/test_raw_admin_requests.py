"""Admin requests sent as raw frames (protocol.framing via the harness), for what clients hide:
per-version response fields, NOT_CONTROLLER from other brokers, and DescribeConfigs output fed
back into AlterConfigs."""
from __future__ import annotations

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    AllocateProducerIdsRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ControlledShutdownRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    UpdateFeaturesRequest,
)
from protocol.schema import ZERO_UUID
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, STATIC_BROKER_CONFIG = 1, 5, 4


def _create(broker: BrokerProcess, name: str, partitions: int = 1, rf: int = 1, timeout_ms: int = 15000,
            version: int = 7, configs: dict[str, str] | None = None):
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    return broker.request(ApiKey.CREATE_TOPICS, version, CreateTopicsRequest(topics=[topic], timeout_ms=timeout_ms))


def _describe(broker: BrokerProcess, resource_type: int, name: str, version: int = 4, synonyms: bool = False):
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=None)],
        include_synonyms=synonyms)
    (result,) = broker.request(ApiKey.DESCRIBE_CONFIGS, version, request).results
    return result


def _alter(broker: BrokerProcess, resource_type: int, name: str, configs: dict[str, str], validate_only: bool = False):
    request = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=validate_only)
    (result,) = broker.request(ApiKey.ALTER_CONFIGS, 2, request).responses
    return result


def test_create_topics_response_fields_by_version(broker: BrokerProcess) -> None:
    (result,) = _create(broker, "v7", partitions=2, configs={"retention.ms": "5000"}).topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 2, 1)
    configs = {c.name: c for c in result.configs}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("5000", DYNAMIC_TOPIC_CONFIG)
    assert configs["segment.bytes"].config_source == DEFAULT_CONFIG
    assert result.topic_id != ZERO_UUID
    (meta,) = broker.metadata(["v7"]).topics
    assert meta.topic_id == result.topic_id

    (failed,) = _create(broker, "v7", partitions=2).topics
    assert failed.error_code == Errors.TOPIC_ALREADY_EXISTS
    assert (failed.num_partitions, failed.replication_factor, failed.configs) == (-1, -1, [])

    (old,) = _create(broker, "v0", version=0).topics
    assert old.error_code == 0


def test_create_topics_with_zero_timeout_times_out_but_creates(broker: BrokerProcess) -> None:
    (result,) = _create(broker, "instant", partitions=2, timeout_ms=0).topics
    assert result.error_code == Errors.REQUEST_TIMED_OUT
    broker.wait_for_leaders("instant", 2)


def test_describe_configs_output_is_accepted_by_alter_configs(broker: BrokerProcess) -> None:
    _create(broker, "roundtrip", configs={"retention.ms": "77777", "cleanup.policy": "compact,delete"})
    described = _describe(broker, TOPIC, "roundtrip", synonyms=True)
    assert described.error_code == 0
    entries = {c.name: c for c in described.configs}
    assert entries["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.source) for s in entries["retention.ms"].synonyms][0] == ("retention.ms", DYNAMIC_TOPIC_CONFIG)
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    everything = {c.name: c.value for c in described.configs if c.value is not None}
    assert _alter(broker, TOPIC, "roundtrip", everything).error_code == 0
    again = {c.name: c.value for c in _describe(broker, TOPIC, "roundtrip").configs}
    assert again == {c.name: c.value for c in described.configs}

    # AlterConfigs replaces the whole override set.
    assert _alter(broker, TOPIC, "roundtrip", {"segment.ms": "3600000"}).error_code == 0
    entries = {c.name: c for c in _describe(broker, TOPIC, "roundtrip").configs}
    assert (entries["retention.ms"].value, entries["retention.ms"].config_source) == ("604800000", DEFAULT_CONFIG)
    assert entries["segment.ms"].config_source == DYNAMIC_TOPIC_CONFIG

    broker_entries = _describe(broker, BROKER, "0").configs
    assert {c.name: c.config_source for c in broker_entries}["num.io.threads"] == STATIC_BROKER_CONFIG
    dynamic = {c.name: c.value for c in broker_entries if not c.read_only and c.value is not None}
    assert "log.retention.bytes" in dynamic and "log.dirs" not in dynamic
    # Kafka 3.9 answers the same: its keystore and truststore keys only go with a listener prefix
    refused = _alter(broker, BROKER, "0", dynamic, validate_only=True)
    assert (refused.error_code, refused.error_message) == (
        Errors.INVALID_REQUEST, "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: HashSet(ssl.keystore.type, ssl.truststore.type)")
    unprefixed = {k: v for k, v in dynamic.items() if k not in ("ssl.keystore.type", "ssl.truststore.type")}
    assert _alter(broker, BROKER, "0", unprefixed, validate_only=True).error_code == 0


@pytest.mark.parametrize(
    ("resource_type", "name", "configs", "error"),
    [
        (TOPIC, "absent", {"retention.ms": "1"}, Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, "alter-errors", {"retention.mss": "1"}, Errors.INVALID_CONFIG),
        (TOPIC, "alter-errors", {"retention.ms": "x"}, Errors.INVALID_CONFIG),  # as Kafka 3.9 answers
        (BROKER, "0", {"broker.id": "5"}, Errors.INVALID_REQUEST),
        (BROKER, "", {"listeners": "PLAINTEXT://:1"}, Errors.INVALID_REQUEST),
        (BROKER, "9", {"log.retention.bytes": "1"}, Errors.INVALID_REQUEST),
        (8, "0", {"root": "INFO"}, Errors.INVALID_REQUEST),
    ],
)
def test_alter_configs_errors(broker: BrokerProcess, resource_type: int, name: str, configs: dict[str, str],
                              error: Errors) -> None:
    _create(broker, "alter-errors")
    result = _alter(broker, resource_type, name, configs)
    assert result.error_code == error, result.error_message


def test_describe_configs_errors(broker: BrokerProcess) -> None:
    assert _describe(broker, TOPIC, "absent").error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _describe(broker, TOPIC, "bad name").error_code == Errors.INVALID_TOPIC_EXCEPTION
    assert _describe(broker, BROKER, "3").error_code == Errors.INVALID_REQUEST
    v0 = _describe(broker, BROKER, "0", version=0)
    assert v0.error_code == 0 and {c.name: c.is_default for c in v0.configs}["log.segment.bytes"] is True


@pytest.mark.parametrize("broker", [{"delete.topic.enable": "false"}], indirect=True)
def test_delete_topic_disabled(broker: BrokerProcess) -> None:
    _create(broker, "kept")
    v6 = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="kept")], timeout_ms=5000)
    (result,) = broker.request(ApiKey.DELETE_TOPICS, 6, v6).responses
    assert result.error_code == Errors.TOPIC_DELETION_DISABLED
    (result,) = broker.request(ApiKey.DELETE_TOPICS, 2, DeleteTopicsRequest(topic_names=["kept"], timeout_ms=5000)).responses
    assert result.error_code == Errors.INVALID_REQUEST


def test_delete_topic_by_id(broker: BrokerProcess) -> None:
    (created,) = _create(broker, "by-id").topics
    request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=created.topic_id)],
                                  timeout_ms=15000)
    (result,) = broker.request(ApiKey.DELETE_TOPICS, 6, request).responses
    assert (result.error_code, result.name) == (0, "by-id")
    (again,) = broker.request(ApiKey.DELETE_TOPICS, 6, request).responses
    assert again.error_code == Errors.UNKNOWN_TOPIC_ID


def test_describe_log_dirs(broker: BrokerProcess) -> None:
    _create(broker, "dirs", partitions=2)
    request = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic="dirs", partitions=[1])])
    (result,) = broker.request(ApiKey.DESCRIBE_LOG_DIRS, 4, request).results
    assert result.error_code == 0 and result.total_bytes > 0 and result.usable_bytes > 0
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("dirs", [1])]


def test_non_controller_answers_not_controller(cluster3: BrokerCluster) -> None:
    first = cluster3.brokers[0]
    controller_id = first.metadata().controller_id
    controller = cluster3.brokers[controller_id]
    other = next(b for b in cluster3.brokers if b.broker_id != controller_id)

    (result,) = _create(other, "nc").topics
    assert result.error_code == Errors.NOT_CONTROLLER
    (result,) = _create(controller, "nc", partitions=3, rf=3).topics
    assert result.error_code == 0
    delete = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="nc")], timeout_ms=5000)
    assert [r.error_code for r in other.request(ApiKey.DELETE_TOPICS, 6, delete).responses] == [Errors.NOT_CONTROLLER]
    grow = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="nc", count=4, assignments=None)],
                                   timeout_ms=5000, validate_only=False)
    assert [r.error_code for r in other.request(ApiKey.CREATE_PARTITIONS, 3, grow).results] == [Errors.NOT_CONTROLLER]
    elect = ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic="nc", partitions=[0])])
    (topic,) = other.request(ApiKey.ELECT_LEADERS, 2, elect).replica_election_results
    assert [p.error_code for p in topic.partition_result] == [Errors.NOT_CONTROLLER]
    (topic,) = controller.request(ApiKey.ELECT_LEADERS, 2, elect).replica_election_results
    assert [p.error_code for p in topic.partition_result] == [Errors.ELECTION_NOT_NEEDED]
    reassign = AlterPartitionReassignmentsRequest(topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
        name="nc", partitions=[AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=None)])])
    assert other.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign).error_code == Errors.NOT_CONTROLLER
    (topic,) = controller.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign).responses
    assert [p.error_code for p in topic.partitions] == [Errors.NO_REASSIGNMENT_IN_PROGRESS]
    listing = ListPartitionReassignmentsRequest(topics=None)
    assert other.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing).error_code == Errors.NOT_CONTROLLER
    listed = controller.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)
    assert (listed.error_code, listed.topics) == (0, [])
    assert [(r.error_code, r.error_message) for r in controller.request(ApiKey.CREATE_PARTITIONS, 3, grow).results] == [(0, None)]
    assert len(controller.metadata(["nc"]).topics[0].partitions) == 4
    # the controller's own requests from brokers, and UpdateFeatures (Kafka's answers elsewhere)
    features = UpdateFeaturesRequest(timeout_ms=5000, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature="foo", max_version_level=1, upgrade_type=1)])
    refused = other.request(ApiKey.UPDATE_FEATURES, 1, features)
    assert (refused.error_code, refused.error_message, refused.results) == (
        Errors.NOT_CONTROLLER, "This is not the correct controller for this cluster.", [])
    alter = AlterPartitionRequest(broker_id=other.broker_id, broker_epoch=-1, topics=[])
    assert other.request(ApiKey.ALTER_PARTITION, 1, alter).error_code == Errors.NOT_CONTROLLER
    allocate = AllocateProducerIdsRequest(broker_id=other.broker_id, broker_epoch=-1)
    assert other.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, allocate).error_code == Errors.NOT_CONTROLLER
    shutdown = ControlledShutdownRequest(broker_id=other.broker_id, broker_epoch=-1)
    assert other.request(ApiKey.CONTROLLED_SHUTDOWN, 3, shutdown).error_code == Errors.STALE_CONTROLLER_EPOCH


def test_cluster_default_broker_config_reaches_describe(broker: BrokerProcess) -> None:
    _create(broker, "inherits")
    assert _alter(broker, BROKER, "", {"log.retention.bytes": "5000000"}).error_code == 0
    # The broker applies dynamic configs when ZooKeeper's change notification reaches it.
    wait_for(lambda: [c.value for c in _describe(broker, BROKER, "").configs] == ["5000000"],
               what="cluster default applied")
    (default_entry,) = _describe(broker, BROKER, "").configs
    assert (default_entry.name, default_entry.value, default_entry.config_source) == (
        "log.retention.bytes", "5000000", 3)
    per_broker = {c.name: c for c in _describe(broker, BROKER, "0", synonyms=True).configs}
    assert (per_broker["log.retention.bytes"].value, per_broker["log.retention.bytes"].config_source) == ("5000000", 3)
    assert [s.source for s in per_broker["log.retention.bytes"].synonyms] == [3, DEFAULT_CONFIG]
    topic = {c.name: c for c in _describe(broker, TOPIC, "inherits").configs}
    assert (topic["retention.bytes"].value, topic["retention.bytes"].config_source) == ("5000000", 3)


def test_describe_configs_filters_keys(broker: BrokerProcess) -> None:
    _create(broker, "filtered")
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name="filtered", configuration_keys=["retention.ms", "segment.ms", "nope"])])
    (result,) = broker.request(ApiKey.DESCRIBE_CONFIGS, 4, request).results
    assert sorted(c.name for c in result.configs) == ["retention.ms", "segment.ms"]


def test_create_partitions_with_assignment(broker: BrokerProcess) -> None:
    _create(broker, "placed")
    assigned = CreatePartitionsRequest(timeout_ms=15000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name="placed", count=3, assignments=[
            CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[0]),
            CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[0])])])
    assert [(r.error_code, r.error_message) for r in broker.request(ApiKey.CREATE_PARTITIONS, 3, assigned).results] == [
        (0, None)]
    assert len(broker.metadata(["placed"]).topics[0].partitions) == 3
    unknown = CreatePartitionsRequest(timeout_ms=15000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name="placed", count=4, assignments=[
            CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[5])])])
    (result,) = broker.request(ApiKey.CREATE_PARTITIONS, 3, unknown).results
    assert (result.error_code, result.error_message) == (
        Errors.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 5.")
