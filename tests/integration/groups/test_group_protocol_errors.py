"""Group APIs answered with Kafka's error codes for bad input (raw requests with the project's codec)."""
from __future__ import annotations

from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests.harness.broker import BrokerProcess
from tests.integration.groups.group_helpers import (
    commit,
    join_group,
    request,
    stable_member,
    unique,
    wait_for_coordinator,
)

def _fetch(broker: BrokerProcess, group: str, topic: str, partition: int = 0, require_stable: bool = False) -> Any:
    body = OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])])
    response = request(broker, ApiKey.OFFSET_FETCH, 7, body)
    assert response.error_code == Errors.NONE
    return response.topics[0].partitions[0]


def _heartbeat(broker: BrokerProcess, group: str, member_id: str, generation: int) -> Errors:
    body = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
    return Errors(request(broker, ApiKey.HEARTBEAT, 3, body).error_code)


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = unique("t")
    broker.create_topic(name, 2)
    return name


def _still_serving(broker: BrokerProcess, group: str, topic: str) -> None:
    assert commit(broker, group, topic, offset=11) is Errors.NONE
    assert _fetch(broker, group, topic).committed_offset == 11


def test_commits_for_unknown_topics_and_partitions(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    wait_for_coordinator(broker, group)
    assert commit(broker, group, unique("missing")) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(broker, group, topic, partition=7) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(broker, group, topic, partition=1) is Errors.NONE
    fetched = _fetch(broker, group, topic, partition=1)
    assert (fetched.committed_offset, fetched.metadata, fetched.error_code) == (5, "", 0)
    _still_serving(broker, group, topic)


def test_stale_generation_and_unknownstable_member(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    wait_for_coordinator(broker, group)
    member_id, generation = stable_member(broker, group)
    assert commit(broker, group, topic, member_id=member_id, generation=generation - 1) is Errors.ILLEGAL_GENERATION
    assert _heartbeat(broker, group, member_id, generation + 1) is Errors.ILLEGAL_GENERATION
    assert commit(broker, group, topic, member_id="nobody", generation=generation) is Errors.UNKNOWN_MEMBER_ID
    assert _heartbeat(broker, group, "nobody", generation) is Errors.UNKNOWN_MEMBER_ID
    assert commit(broker, group, topic) is Errors.UNKNOWN_MEMBER_ID  # no membership, but the group has members
    assert _heartbeat(broker, group, member_id, generation) is Errors.NONE
    assert commit(broker, group, topic, member_id=member_id, generation=generation) is Errors.NONE
    sync = request(broker, ApiKey.SYNC_GROUP, 3, SyncGroupRequest(
        group_id=group, generation_id=generation, member_id="nobody", assignments=[]))
    assert sync.error_code == Errors.UNKNOWN_MEMBER_ID
    assert join_group(broker, group, member_id="nobody").error_code == Errors.UNKNOWN_MEMBER_ID
    left = request(broker, ApiKey.LEAVE_GROUP, 3, LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=member_id), LeaveGroupRequest.MemberIdentity(member_id="nobody")]))
    assert left.error_code == 0 and [m.error_code for m in left.members] == [0, Errors.UNKNOWN_MEMBER_ID]
    assert _heartbeat(broker, group, member_id, generation) is Errors.UNKNOWN_MEMBER_ID


def test_oversized_offset_metadata(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    wait_for_coordinator(broker, group)
    assert commit(broker, group, topic, metadata="m" * 4097) is Errors.OFFSET_METADATA_TOO_LARGE
    assert _fetch(broker, group, topic).committed_offset == -1
    assert commit(broker, group, topic, metadata="m" * 4096) is Errors.NONE
    assert _fetch(broker, group, topic).metadata == "m" * 4096


def test_inconsistent_protocols_and_bad_session_timeouts(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    wait_for_coordinator(broker, group)
    stable_member(broker, group)
    assert join_group(broker, group, protocol_type="connect").error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert join_group(broker, group, protocols=[("roundrobin", b"")]).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    other = unique("g")
    wait_for_coordinator(broker, other)
    assert join_group(broker, other, protocols=[]).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert join_group(broker, other, session_ms=5999).error_code == Errors.INVALID_SESSION_TIMEOUT
    assert join_group(broker, other, session_ms=1800001).error_code == Errors.INVALID_SESSION_TIMEOUT
    assert join_group(broker, "").error_code == Errors.INVALID_GROUP_ID
    _still_serving(broker, other, topic)


def test_find_coordinator_batches_and_key_types(broker: BrokerProcess) -> None:
    groups = [unique("g"), unique("g")]
    coordinator = wait_for_coordinator(broker, groups[0])
    response = request(broker, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=groups))
    assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
        (g, 0, coordinator, broker.port) for g in groups]
    txn = request(broker, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]))
    assert [(c.key, c.error_code, c.node_id) for c in txn.coordinators] == [("tx", Errors.COORDINATOR_NOT_AVAILABLE, -1)]
    old = request(broker, ApiKey.FIND_COORDINATOR, 0, FindCoordinatorRequest(key=groups[1]))
    assert (old.error_code, old.node_id, old.host, old.port) == (0, coordinator, "127.0.0.1", broker.port)


def test_batched_offset_fetch_list_filter_delete(broker: BrokerProcess, topic: str) -> None:
    empty_group, live_group = unique("g"), unique("g")
    wait_for_coordinator(broker, empty_group)
    assert commit(broker, empty_group, topic, offset=3) is Errors.NONE
    stable_member(broker, live_group)
    fetched = request(broker, ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(require_stable=True, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=empty_group, topics=None),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=live_group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])]))
    by_group = {g.group_id: g for g in fetched.groups}
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
            for t in by_group[empty_group].topics] == [(topic, [(0, 3)])]
    assert by_group[live_group].topics[0].partitions[0].committed_offset == -1

    listed = request(broker, ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=["stable"]))
    states = {g.group_id: g.group_state for g in listed.groups}
    assert states.get(live_group) == "Stable" and empty_group not in states
    listed = request(broker, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["consumer"]))
    assert listed.groups == []

    deleted = request(broker, ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(group_id=live_group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0),
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=9)])]))
    assert deleted.error_code == 0  # not a consumer protocol subscription it can read: subscribed to everything
    assert sorted((p.partition_index, p.error_code) for p in deleted.topics[0].partitions) == [
        (0, Errors.GROUP_SUBSCRIBED_TO_TOPIC), (9, Errors.UNKNOWN_TOPIC_OR_PARTITION)]

    result = request(broker, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[empty_group, live_group]))
    assert {r.group_id: r.error_code for r in result.results} == {empty_group: 0, live_group: Errors.NON_EMPTY_GROUP}
    assert _fetch(broker, empty_group, topic).committed_offset == -1


def test_offsets_topic_is_created_on_first_find_coordinator_with_kafkas_configs(broker: BrokerProcess) -> None:
    from coordination.kafka_zk_client import KafkaZkClient

    group = unique("g")
    first = request(broker, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
    assert first.error_code == Errors.COORDINATOR_NOT_AVAILABLE  # created now, no leader yet
    wait_for_coordinator(broker, group)
    (metadata,) = broker.metadata(["__consumer_offsets"]).topics
    assert metadata.is_internal and len(metadata.partitions) == 50
    zk = KafkaZkClient.connect(broker.zk_connect, 10000)
    try:
        config = zk.get_entity_config("topics", "__consumer_offsets")
    finally:
        zk.close()
    assert config == {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}


@pytest.mark.parametrize("broker", [{"offsets.topic.replication.factor": "3"}], indirect=True)
def test_offsets_topic_is_not_created_with_fewer_live_brokers_than_its_replication_factor(
        broker: BrokerProcess) -> None:
    group = unique("g")
    for _ in range(3):
        response = request(broker, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
        assert response.error_code == Errors.COORDINATOR_NOT_AVAILABLE and response.node_id == -1
    assert broker.metadata(["__consumer_offsets"]).topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(broker, group, unique("t")) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert join_group(broker, group).error_code == Errors.NOT_COORDINATOR
