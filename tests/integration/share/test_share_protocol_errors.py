"""Share-group APIs answered with Kafka 4.2's errors for bad input (raw requests with the project's
codec), and what each one leaves unchanged; ListGroups and DeleteGroups on share groups; and
group.share.enable=false, which takes the APIs out of ApiVersions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    ApiVersionsRequest,
    DeleteGroupsRequest,
    ListGroupsRequest,
    ProduceRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from protocol.records.builder import RecordBatchBuilder
from tests.harness.broker import BrokerProcess
from tests.integration.groups.group_helpers import (
    join_group,
    request,
    stable_member,
    unique,
    wait_for_coordinator,
)
from tests.integration.share.share_helpers import STATE_TOPIC

BROKER_OVERRIDES = {"offsets.topic.num.partitions": "1", **STATE_TOPIC, "group.share.max.size": "2"}
SHARE_APIS = {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _heartbeat(broker: BrokerProcess, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return request(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics))


def _fetch(broker: BrokerProcess, group: str, member: str, epoch: int, topic_id: uuid.UUID | None = None,
           acks: list[tuple[int, int, list[int]]] | None = None, wait_ms: int = 0) -> Any:
    R = ShareFetchRequest
    topics = [] if topic_id is None else [R.FetchTopic(topic_id=topic_id, partitions=[R.FetchPartition(
        partition_index=0, acknowledgement_batches=[R.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                                           acknowledge_types=t)
                                                    for f, last, t in acks or []])])]
    return request(broker, ApiKey.SHARE_FETCH, 1, R(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=100, batch_size=100, topics=topics))


def _acknowledge(broker: BrokerProcess, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                 acks: list[tuple[int, int, list[int]]]) -> Any:
    R = ShareAcknowledgeRequest
    return request(broker, ApiKey.SHARE_ACKNOWLEDGE, 1, R(
        group_id=group, member_id=member, share_session_epoch=epoch, topics=[R.AcknowledgeTopic(
            topic_id=topic_id, partitions=[R.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                R.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=t)
                for f, last, t in acks])])]))


def _produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    batch = builder.build()
    response = request(broker, ApiKey.PRODUCE, 9, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    assert response.responses[0].partition_responses[0].error_code == Errors.NONE


def _member(broker: BrokerProcess) -> tuple[str, str, uuid.UUID, str]:
    """A fresh topic and a share group with one member subscribed to it: (group, member, topic id, topic)."""
    topic, group, member = unique("t"), unique("g"), uuid.uuid4().hex
    broker.create_topic(topic, 1)
    wait_for_coordinator(broker, group)
    joined = _heartbeat(broker, group, member, 0, [topic])
    assert joined.error_code == Errors.NONE and joined.member_epoch > 0
    topic_id = broker.metadata([topic]).topics[0].topic_id
    assert [list(tp.partitions) for tp in joined.assignment.topic_partitions] == [[0]]
    assert joined.assignment.topic_partitions[0].topic_id == topic_id
    return group, member, topic_id, topic


def test_heartbeat_errors(broker: BrokerProcess) -> None:
    group, member, _topic_id, topic = _member(broker)
    epoch = _heartbeat(broker, group, member, 0, [topic]).member_epoch
    assert _heartbeat(broker, group, "someone-else", 5).error_code == Errors.UNKNOWN_MEMBER_ID
    assert _heartbeat(broker, group, member, epoch + 7).error_code == Errors.FENCED_MEMBER_EPOCH
    assert _heartbeat(broker, group, member, epoch).member_epoch == epoch  # still a member, same epoch
    assert _heartbeat(broker, group, "", 0, [topic]).error_code == Errors.INVALID_REQUEST
    assert _heartbeat(broker, group, uuid.uuid4().hex, 0, None).error_code == Errors.INVALID_REQUEST
    assert _heartbeat(broker, group, uuid.uuid4().hex, 0, [topic]).error_code == Errors.NONE
    full = _heartbeat(broker, group, uuid.uuid4().hex, 0, [topic])  # group.share.max.size=2
    assert full.error_code == Errors.GROUP_MAX_SIZE_REACHED


def test_a_classic_group_id_is_not_a_share_group(broker: BrokerProcess) -> None:
    group, topic = unique("classic"), unique("t")
    wait_for_coordinator(broker, group)
    stable_member(broker, group)
    answer = _heartbeat(broker, group, uuid.uuid4().hex, 0, [topic])
    assert answer.error_code == Errors.GROUP_ID_NOT_FOUND
    described = request(broker, ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(group_ids=[group]))
    assert described.groups[0].error_code == Errors.GROUP_ID_NOT_FOUND


def test_share_session_errors_change_nothing(broker: BrokerProcess) -> None:
    group, member, topic_id, topic = _member(broker)
    assert _fetch(broker, group, member, 3).error_code == Errors.SHARE_SESSION_NOT_FOUND
    opened = _fetch(broker, group, member, 0, topic_id)  # opens the session; the share-partition starts at the end
    assert opened.error_code == Errors.NONE
    _produce(broker, topic, [b"a", b"b", b"c"])
    assert _fetch(broker, group, member, 5).error_code == Errors.INVALID_SHARE_SESSION_EPOCH
    fetched = _fetch(broker, group, member, 1, wait_ms=3000)
    assert fetched.error_code == Errors.NONE
    acquired = fetched.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(0, 2, 1)]
    # epoch 0 cannot acknowledge; a stale epoch and an unknown session neither
    assert _acknowledge(broker, group, member, 0, topic_id, [(0, 0, [1])]).error_code == \
        Errors.INVALID_SHARE_SESSION_EPOCH
    assert _acknowledge(broker, group, member, 1, topic_id, [(0, 0, [1])]).error_code == \
        Errors.INVALID_SHARE_SESSION_EPOCH
    assert _acknowledge(broker, group, "nobody", 1, topic_id, [(0, 0, [1])]).error_code == \
        Errors.SHARE_SESSION_NOT_FOUND
    assert _fetch(broker, group, member, 0, topic_id, acks=[(0, 0, [1])]).error_code == Errors.INVALID_REQUEST
    # a record the member does not hold: INVALID_RECORD_STATE, and the good range in the same
    # partition is not applied either
    bad = _acknowledge(broker, group, member, 2, topic_id, [(0, 0, [1]), (5, 5, [1])])
    assert bad.error_code == Errors.NONE and bad.responses[0].partitions[0].error_code == Errors.INVALID_RECORD_STATE
    other = _acknowledge(broker, group, "intruder", 3, topic_id, [(0, 0, [1])])
    assert other.error_code == Errors.SHARE_SESSION_NOT_FOUND
    good = _acknowledge(broker, group, member, 3, topic_id, [(0, 2, [1, 2, 3])])
    assert good.responses[0].partitions[0].error_code == Errors.NONE
    again = _fetch(broker, group, member, 4, wait_ms=3000)  # the released record comes back, count 2
    assert [(a.first_offset, a.last_offset, a.delivery_count)
            for a in again.responses[0].partitions[0].acquired_records] == [(1, 1, 2)]
    closed = _acknowledge(broker, group, member, -1, topic_id, [(1, 1, [1])])
    assert closed.responses[0].partitions[0].error_code == Errors.NONE
    assert _fetch(broker, group, member, 5).error_code == Errors.SHARE_SESSION_NOT_FOUND


def test_list_and_delete_share_groups(broker: BrokerProcess) -> None:
    group, member, _topic_id, _topic = _member(broker)
    assert join_group(broker, group).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL  # a classic join
    listed = request(broker, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["share"]))
    found = {g.group_id: (g.group_state, g.group_type, g.protocol_type) for g in listed.groups}
    assert found[group] == ("Stable", "share", "share")
    classic_only = request(broker, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["classic"]))
    assert group not in {g.group_id for g in classic_only.groups}
    delete = request(broker, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[group]))
    assert delete.results[0].error_code == Errors.NON_EMPTY_GROUP
    assert _heartbeat(broker, group, member, -1).member_epoch == -1
    delete = request(broker, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[group]))
    assert delete.results[0].error_code == Errors.NONE
    listed = request(broker, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["share"]))
    assert group not in {g.group_id for g in listed.groups}


def test_share_groups_are_advertised_with_kafka_42_versions(broker: BrokerProcess) -> None:
    versions = request(broker, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert served[76] == (1, 1) and served[77] == (1, 1) and served[78] == (1, 2) and served[79] == (1, 2)
    assert ("share.version", 0, 1) in [(f.name, f.min_version, f.max_version) for f in versions.supported_features]
    assert ("share.version", 1) in [(f.name, f.max_version_level) for f in versions.finalized_features]


@pytest.fixture
def share_off_broker(zk_connect: str, tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(zk_connect, 0, tmp_path, {"group.share.enable": "false"})
    try:
        process.start()
        yield process
    finally:
        process.stop()


def test_share_groups_off_advertises_none_of_their_apis(share_off_broker: BrokerProcess) -> None:
    versions = request(share_off_broker, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    assert not SHARE_APIS & {k.api_key for k in versions.api_keys}
    assert {0, 1, 11} <= {k.api_key for k in versions.api_keys}
    assert "share.version" not in {f.name for f in versions.finalized_features}  # level 0 is not listed


def _describe_offsets(broker: BrokerProcess, group: str, topic: str) -> tuple[int, Any]:
    from protocol.messages import DescribeShareGroupOffsetsRequest as D

    answer = request(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, D(groups=[D.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=[D.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])]))
    found = answer.groups[0]
    return found.error_code, found.topics[0].partitions[0] if found.topics else None


def test_share_group_offsets_describe_alter_and_delete(broker: BrokerProcess) -> None:
    from protocol.messages import AlterShareGroupOffsetsRequest as A
    from protocol.messages import DeleteShareGroupOffsetsRequest as Del

    group, member, topic_id, topic = _member(broker)
    assert _fetch(broker, group, member, 0, topic_id).error_code == Errors.NONE  # the share-partition starts at 0
    _produce(broker, topic, [b"a", b"b", b"c", b"d"])
    fetched = _fetch(broker, group, member, 1, wait_ms=3000)
    assert fetched.responses[0].partitions[0].acquired_records[0].last_offset == 3
    assert _acknowledge(broker, group, member, 2, topic_id, [(0, 3, [1, 1, 2, 2])]).error_code == Errors.NONE
    error, described = _describe_offsets(broker, group, topic)
    assert error == Errors.NONE and (described.start_offset, described.lag) == (2, 2)

    def alter(offset: int) -> Any:
        return request(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, A(group_id=group, topics=[
            A.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)])]))

    assert alter(0).error_code == Errors.NON_EMPTY_GROUP
    assert _heartbeat(broker, group, member, -1).member_epoch == -1
    altered = alter(0)
    assert altered.error_code == Errors.NONE and altered.responses[0].partitions[0].error_code == Errors.NONE
    assert _describe_offsets(broker, group, topic)[1].start_offset == 0
    again = uuid.uuid4().hex  # a new member reads from the altered start offset
    assert _heartbeat(broker, group, again, 0, [topic]).error_code == Errors.NONE
    refetched = _fetch(broker, group, again, 0, topic_id)
    assert [(a.first_offset, a.last_offset) for a in refetched.responses[0].partitions[0].acquired_records] == [(0, 3)]
    assert _heartbeat(broker, group, again, -1).member_epoch == -1
    deleted = request(broker, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, Del(
        group_id=group, topics=[Del.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]))
    assert deleted.error_code == Errors.NONE and deleted.responses[0].error_code == Errors.NONE
    assert _describe_offsets(broker, group, topic)[1].start_offset == -1
    assert _describe_offsets(broker, unique("nobody"), topic)[0] == Errors.GROUP_ID_NOT_FOUND


def test_share_group_configs_are_validated_described_and_applied(broker: BrokerProcess) -> None:
    from protocol.messages import DescribeConfigsRequest
    from protocol.messages import IncrementalAlterConfigsRequest as IAC

    group, member, topic_id, topic = _member(broker)

    def alter(**values: str) -> int:
        return broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IAC(resources=[IAC.AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[
                IAC.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v)
                for k, v in values.items()])])).responses[0].error_code

    for bad in ({"share_record_lock_duration_ms": "1000"},  # below group.share.min.record.lock.duration.ms
                {"share_session_timeout_ms": "90000"},  # above group.share.max.session.timeout.ms
                {"share_heartbeat_interval_ms": "15000", "share_session_timeout_ms": "45000",
                 "share_auto_offset_reset": "by_duration:PT1H"},  # fine alone; together heartbeat < session holds
                {"share_auto_offset_reset": "by_duration:one-hour"}, {"share_auto_offset_reset": "sideways"}):
        expected = Errors.NONE if "share_heartbeat_interval_ms" in bad else Errors.INVALID_CONFIG
        assert alter(**bad) == expected, bad
    assert alter(share_heartbeat_interval_ms="15000", share_session_timeout_ms="15000") == Errors.INVALID_CONFIG
    assert alter(share_record_lock_duration_ms="20000", share_heartbeat_interval_ms="6000",
                 share_auto_offset_reset="by_duration:pt2h30m", share_isolation_level="read_committed") == 0
    described = broker.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                       configuration_keys=None)])).results[0]
    values = {c.name: (c.value, c.config_source) for c in described.configs}
    assert values["share.record.lock.duration.ms"] == ("20000", 8)  # DYNAMIC_GROUP_CONFIG
    assert values["share.heartbeat.interval.ms"] == ("6000", 8)
    assert values["share.auto.offset.reset"] == ("by_duration:pt2h30m", 8)  # as set
    assert values["share.session.timeout.ms"] == ("45000", 8)  # set with the first accepted change
    assert values["share.isolation.level"] == ("read_committed", 8)

    applied = wait_for_value(lambda: _heartbeat(broker, group, member, 0, [topic]).heartbeat_interval_ms, 6000)
    assert applied == 6000
    _produce(broker, topic, [b"x"])
    fetched = _fetch(broker, group, member, 0, topic_id, wait_ms=3000)
    assert fetched.error_code == Errors.NONE
    assert fetched.acquisition_lock_timeout_ms == 20000  # the group's lock duration, not the broker's


def wait_for_value(read: Any, expected: Any) -> Any:
    """``read()`` once it returns ``expected`` (group configs reach the broker through ZooKeeper)."""
    from tests.harness.waiting import wait_for

    return wait_for(lambda: [read()] if read() == expected else [], f"the value {expected}", 30)[0]


def test_share_and_consumer_groups_do_not_share_ids(broker: BrokerProcess) -> None:
    from protocol.messages import ConsumerGroupDescribeRequest
    from tests.integration.groups.test_consumer_protocol_errors import (
        heartbeat as consumer_heartbeat,
    )

    share_group, member, _topic_id, topic = _member(broker)
    refused = consumer_heartbeat(broker, share_group, uuid.uuid4().hex, 0, subscribed_topic_names=[topic])
    assert (refused.error_code, refused.error_message) == (Errors.GROUP_ID_NOT_FOUND,
                                                           f"Group {share_group} is not a consumer group.")
    described = request(broker, ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                        ConsumerGroupDescribeRequest(group_ids=[share_group])).groups[0]
    assert (described.error_code, described.error_message) == (Errors.GROUP_ID_NOT_FOUND,
                                                                f"Group {share_group} is not a consumer group.")
    assert _heartbeat(broker, share_group, member, 0, [topic]).error_code == Errors.NONE  # unchanged

    consumer_group = unique("consumer")
    wait_for_coordinator(broker, consumer_group)
    joined = consumer_heartbeat(broker, consumer_group, uuid.uuid4().hex, 0, subscribed_topic_names=[topic])
    assert joined.error_code == Errors.NONE
    answer = _heartbeat(broker, consumer_group, uuid.uuid4().hex, 0, [topic])
    assert (answer.error_code, answer.error_message) == (Errors.GROUP_ID_NOT_FOUND,
                                                         f"Group {consumer_group} is not a share group.")
    assert consumer_heartbeat(broker, consumer_group, joined.member_id, joined.member_epoch).error_code == Errors.NONE
