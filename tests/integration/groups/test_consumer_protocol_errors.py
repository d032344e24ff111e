"""ConsumerGroupHeartbeat's error paths with raw requests, as Kafka 4.2 answers them (no Kafka 4 broker
is at hand: the expectations follow its GroupMetadataManager), and a group's state across a restart."""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
)
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import unique, wait_for_coordinator

HB = ConsumerGroupHeartbeatRequest


def heartbeat(broker: BrokerProcess, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    fields.setdefault("rebalance_timeout_ms", 60000 if epoch == 0 else -1)
    if epoch == 0:
        fields.setdefault("topic_partitions", [])
        fields.setdefault("subscribed_topic_names", [])
    return broker.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, HB(group_id=group, member_id=member_id,
                                                                  member_epoch=epoch, **fields))


@pytest.fixture
def group(broker: BrokerProcess) -> str:
    name = unique("g")
    wait_for_coordinator(broker, name)
    return name


def test_invalid_heartbeats_get_kafkas_errors_and_change_nothing(broker: BrokerProcess, group: str) -> None:
    member = str(uuid.uuid4())
    cases = [
        (dict(member_id="", epoch=0), Errors.INVALID_REQUEST, "MemberId can't be empty."),
        (dict(member_id=member, epoch=0, rebalance_timeout_ms=-1), Errors.INVALID_REQUEST,
         "RebalanceTimeoutMs must be provided in first request."),
        (dict(member_id=member, epoch=0, subscribed_topic_names=None), Errors.INVALID_REQUEST,
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (dict(member_id=member, epoch=-3), Errors.INVALID_REQUEST, "MemberEpoch is invalid."),
        (dict(member_id=member, epoch=0, server_assignor="sticky"), Errors.UNSUPPORTED_ASSIGNOR, None),
        (dict(member_id=member, epoch=0, subscribed_topic_regex="(?<=a)b"), Errors.INVALID_REGULAR_EXPRESSION,
         None),
        (dict(member_id=member, epoch=3), Errors.GROUP_ID_NOT_FOUND, None),
    ]
    for fields, error, message in cases:
        answer = heartbeat(broker, group, fields.pop("member_id"), fields.pop("epoch"), **fields)
        assert answer.error_code == error, (fields, answer)
        if message is not None:
            assert answer.error_message == message
    described = broker.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    assert described.groups[0].error_code == Errors.GROUP_ID_NOT_FOUND  # nothing was created


def test_epochs_fence_members_and_static_members_keep_their_place(broker: BrokerProcess, group: str) -> None:
    topic = unique("t")
    broker.create_topic(topic, 2)
    a = str(uuid.uuid4())
    joined = heartbeat(broker, group, a, 0, subscribed_topic_names=[topic], instance_id="i-1")
    assert joined.error_code == 0 and joined.member_epoch == 1 and joined.heartbeat_interval_ms == 5000
    assert sorted(p for t in joined.assignment.topic_partitions for p in t.partitions) == [0, 1]
    assert heartbeat(broker, group, a, 2).error_code == Errors.FENCED_MEMBER_EPOCH
    assert heartbeat(broker, group, "unknown", 1).error_code == Errors.UNKNOWN_MEMBER_ID
    # Another process with the same instance id while the first is there: refused.
    b = str(uuid.uuid4())
    assert heartbeat(broker, group, b, 0, subscribed_topic_names=[topic], instance_id="i-1").error_code == \
        Errors.UNRELEASED_INSTANCE_ID
    # A commit at the wrong epoch is stale; at the member's epoch it is taken.
    commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=0, member_id=a, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=7)])])
    assert broker.request(ApiKey.OFFSET_COMMIT, 9, commit).topics[0].partitions[0].error_code == \
        Errors.STALE_MEMBER_EPOCH
    commit.generation_id_or_member_epoch = 1
    assert broker.request(ApiKey.OFFSET_COMMIT, 9, commit).topics[0].partitions[0].error_code == 0
    # The static member leaves temporarily (-2) and comes back under a new member id: same partitions.
    assert heartbeat(broker, group, a, -2, instance_id="i-1").member_epoch == -2
    back = heartbeat(broker, group, b, 0, subscribed_topic_names=[topic], instance_id="i-1")
    assert back.error_code == 0
    assert sorted(p for t in back.assignment.topic_partitions for p in t.partitions) == [0, 1]


def test_a_group_keeps_its_members_epochs_and_offsets_across_a_restart(broker: BrokerProcess, group: str) -> None:
    topic = unique("t")
    broker.create_topic(topic, 3)
    member = str(uuid.uuid4())
    joined = heartbeat(broker, group, member, 0, subscribed_topic_names=[topic], server_assignor="range")
    assert joined.error_code == 0
    before = broker.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    broker.stop()
    broker.start()
    wait_for_coordinator(broker, group)

    def described() -> Any:
        answer = broker.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
        return answer if answer.groups[0].error_code == 0 else None

    after = wait_for(described, "the group loaded again", 30)
    keep = ("group_epoch", "assignment_epoch", "assignor_name", "group_state")
    assert [getattr(after.groups[0], f) for f in keep] == [getattr(before.groups[0], f) for f in keep]
    (m_before,), (m_after,) = before.groups[0].members, after.groups[0].members
    assert (m_after.member_id, m_after.member_epoch, m_after.assignment) == \
        (m_before.member_id, m_before.member_epoch, m_before.assignment)
    # The member goes on at its epoch after the restart.
    assert heartbeat(broker, group, member, joined.member_epoch).error_code == 0


@pytest.mark.parametrize("broker", [{"group.coordinator.rebalance.protocols": "classic"}], indirect=True)
def test_without_the_consumer_protocol_its_apis_are_not_advertised(broker: BrokerProcess) -> None:
    answer = broker.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t",
                                                                      client_software_version="1"))
    keys = {k.api_key for k in answer.api_keys}
    assert ApiKey.JOIN_GROUP in keys
    assert not keys & {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}


def test_group_configs_override_the_brokers_per_group(broker: BrokerProcess, group: str) -> None:
    from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    IAC = IncrementalAlterConfigsRequest

    def alter(**values: str) -> Any:
        return broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IAC(resources=[IAC.AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[
                IAC.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v)
                for k, v in values.items()])])).responses[0]

    too_small = alter(consumer_heartbeat_interval_ms="100")
    assert too_small.error_code == Errors.INVALID_CONFIG
    assert alter(consumer_heartbeat_interval_ms="6000").error_code == 0
    described = broker.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                       configuration_keys=None)])).results[0]
    values = {c.name: (c.value, c.config_source) for c in described.configs}
    assert values["consumer.heartbeat.interval.ms"] == ("6000", 8)  # DYNAMIC_GROUP_CONFIG
    assert values["consumer.session.timeout.ms"] == ("45000", 5)  # DEFAULT_CONFIG
    topic = unique("t")
    broker.create_topic(topic, 1)
    answer = wait_for(lambda: (a := heartbeat(broker, group, str(uuid.uuid4()), 0, subscribed_topic_names=[topic]))
                      .heartbeat_interval_ms == 6000 and a, "the override applied", 30)
    assert answer.error_code == 0


SMALL_GROUPS = {"group.consumer.max.size": "2", "group.consumer.min.session.timeout.ms": "1000",
                "group.consumer.session.timeout.ms": "2000", "group.consumer.min.heartbeat.interval.ms": "500",
                "group.consumer.heartbeat.interval.ms": "500"}


@pytest.mark.parametrize("broker", [SMALL_GROUPS], indirect=True)
def test_a_full_group_refuses_and_a_silent_member_is_fenced(broker: BrokerProcess) -> None:
    group, topic = unique("g"), unique("t")
    wait_for_coordinator(broker, group)
    broker.create_topic(topic, 4)
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    assert heartbeat(broker, group, a, 0, subscribed_topic_names=[topic]).error_code == 0
    joined_b = heartbeat(broker, group, b, 0, subscribed_topic_names=[topic])
    assert joined_b.error_code == 0
    full = heartbeat(broker, group, c, 0, subscribed_topic_names=[topic])
    assert full.error_code == Errors.GROUP_MAX_SIZE_REACHED
    # a goes silent: once its session (2 s) is over, b gets every partition.
    epoch = joined_b.member_epoch

    def b_owns_everything() -> bool:
        nonlocal epoch
        answer = heartbeat(broker, group, b, epoch, topic_partitions=None)
        assert answer.error_code == 0, answer
        epoch = answer.member_epoch
        owned = {p for t in (answer.assignment.topic_partitions if answer.assignment else []) for p in t.partitions}
        return owned == {0, 1, 2, 3}

    wait_for(b_owns_everything, "the silent member's partitions given to the other", 30, interval=0.3)
    assert heartbeat(broker, group, a, 1).error_code == Errors.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("broker", [SMALL_GROUPS], indirect=True)
def test_a_member_that_keeps_partitions_past_its_rebalance_timeout_is_fenced(broker: BrokerProcess) -> None:
    group, topic = unique("g"), unique("t")
    wait_for_coordinator(broker, group)
    broker.create_topic(topic, 2)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    joined = heartbeat(broker, group, a, 0, subscribed_topic_names=[topic], rebalance_timeout_ms=1000)
    owned = [HB.TopicPartitions(topic_id=t.topic_id, partitions=list(t.partitions))
             for t in joined.assignment.topic_partitions]
    assert heartbeat(broker, group, b, 0, subscribed_topic_names=[topic]).error_code == 0
    # a is asked to give one partition up, and keeps reporting both: past its rebalance timeout (1 s)
    # it is fenced, and its next heartbeat says so.
    def fenced() -> bool:
        answer = heartbeat(broker, group, a, joined.member_epoch, topic_partitions=owned)
        return answer.error_code == Errors.UNKNOWN_MEMBER_ID

    wait_for(fenced, "the member fenced after its rebalance timeout", 30, interval=0.3)


@pytest.mark.parametrize("broker", [{"min.insync.replicas": "2", "offsets.topic.replication.factor": "1"}],
                         indirect=True)
def test_a_heartbeat_whose_records_cannot_be_written_changes_nothing(broker: BrokerProcess, group: str) -> None:
    """__consumer_offsets at RF=1 under min.insync.replicas=2 takes no write: Kafka's coordinator
    runtime answers COORDINATOR_NOT_AVAILABLE (the client looks for the coordinator again and
    retries) and the join never happened."""
    for attempt in range(2):
        answer = heartbeat(broker, group, "m1", 0, subscribed_topic_names=["t"])
        assert answer.error_code == Errors.COORDINATOR_NOT_AVAILABLE, (attempt, answer)
    described = broker.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    assert described.groups[0].error_code == Errors.GROUP_ID_NOT_FOUND, described
