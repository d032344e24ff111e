"""DeleteGroups of a share group deletes the state of every one of its share-partitions at their
share coordinators, also of partitions led by brokers other than the group coordinator (three
brokers, raw requests with the project's codec)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    ShareGroupHeartbeatRequest,
)
from protocol.messages import (
    ReadShareGroupStateSummaryRequest as Summary,
)
from protocol.messages import (
    ShareFetchRequest as F,
)
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import unique
from tests.integration.share.share_helpers import STATE_TOPIC

OVERRIDES = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1", **STATE_TOPIC}


def _state_summary(cluster: BrokerCluster, group: str, topic_id: uuid.UUID, partition: int) -> int:
    """The error ReadShareGroupStateSummary answers at the share-partition's share coordinator."""
    from broker.coordinator.internal_topic import partition_for
    from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, coordinator_key

    state_partition = partition_for(coordinator_key(group, topic_id, partition),
                                    int(STATE_TOPIC["share.coordinator.state.topic.num.partitions"]))
    described = cluster.brokers[0].metadata([SHARE_GROUP_STATE_TOPIC]).topics[0]
    leader = next(p.leader_id for p in described.partitions if p.partition_index == state_partition)
    answer = cluster.brokers[leader].request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, Summary(
        group_id=group, topics=[Summary.ReadStateSummaryData(topic_id=topic_id, partitions=[
            Summary.PartitionData(partition=partition, leader_epoch=0)])]))
    return answer.results[0].partitions[0].error_code


def _fetch(broker: BrokerProcess, group: str, member: str, topic_id: uuid.UUID, partition: int) -> Any:
    """Open a share session on the partition's leader: it loads the share-partition (its state is
    initialized at the share coordinator)."""
    return broker.request(ApiKey.SHARE_FETCH, 1, F(
        group_id=group, member_id=member, share_session_epoch=0, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        max_records=10, batch_size=10, topics=[F.FetchTopic(topic_id=topic_id, partitions=[
            F.FetchPartition(partition_index=partition, acknowledgement_batches=[])])]))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("cluster3", [OVERRIDES], indirect=True, ids=["three"])
def test_deleting_a_share_group_deletes_the_state_of_all_its_partitions(cluster3: BrokerCluster) -> None:
    first = cluster3.brokers[0]
    topic, group, member = unique("t"), unique("g"), uuid.uuid4().hex
    first.create_topic(topic, 3, replication_factor=1)
    described = wait_for(lambda: [t for t in first.metadata([topic]).topics
                                  if all(p.leader_id >= 0 for p in t.partitions) and len(t.partitions) == 3],
                         "the topic's leaders", 30)[0]
    topic_id, leaders = described.topic_id, {p.partition_index: p.leader_id for p in described.partitions}
    assert len(set(leaders.values())) > 1  # led by several brokers

    def found() -> list[int]:
        answer = first.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
        return [answer.node_id] if answer.error_code == Errors.NONE else []

    coordinator = cluster3.brokers[wait_for(found, "a group coordinator", 30)[0]]

    def heartbeat(epoch: int, topics: list[str] | None = None) -> Any:
        return coordinator.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics))

    assert heartbeat(0, [topic]).error_code == Errors.NONE
    for partition, leader in leaders.items():
        fetched = wait_for(lambda p=partition, b=leader: [a for a in [_fetch(cluster3.brokers[b], group, member,
                                                                             topic_id, p)]
                                                          if a.responses and a.responses[0].partitions[0].error_code
                                                          == Errors.NONE], f"partition {partition} loaded", 60)
        assert fetched
    for partition in leaders:
        assert _state_summary(cluster3, group, topic_id, partition) == Errors.NONE
    assert heartbeat(-1).error_code == Errors.NONE
    deleted = coordinator.request(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[group]))
    assert deleted.results[0].error_code == Errors.NONE
    for partition in leaders:
        assert _state_summary(cluster3, group, topic_id, partition) == Errors.UNKNOWN_TOPIC_OR_PARTITION
