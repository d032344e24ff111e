"""ElectLeaders and partition reassignments on a three-broker cluster (raw requests)."""
from __future__ import annotations

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    CreateTopicsRequest,
    DescribeClusterRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PREFERRED, UNCLEAN = 0, 1


def _controller(cluster: BrokerCluster) -> BrokerProcess:
    return cluster.brokers[cluster.brokers[0].metadata().controller_id]


def _partition(broker: BrokerProcess, topic: str, partition: int = 0):  # type: ignore[no-untyped-def]
    (meta,) = broker.metadata([topic]).topics
    return next(p for p in meta.partitions if p.partition_index == partition)



def _elect(broker: BrokerProcess, topic: str, election_type: int = PREFERRED) -> list[tuple[int, int]]:
    request = ElectLeadersRequest(election_type=election_type, timeout_ms=15000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[0])])
    (result,) = broker.request(ApiKey.ELECT_LEADERS, 2, request).replica_election_results
    return [(p.partition_id, p.error_code) for p in result.partition_result]


def test_reorder_replicas_then_elect_preferred_leader(cluster3: BrokerCluster) -> None:
    controller = _controller(cluster3)
    create = CreateTopicsRequest(timeout_ms=15000, topics=[CreateTopicsRequest.CreatableTopic(
        name="pref", num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[0, 1, 2])])])
    assert [t.error_code for t in controller.request(ApiKey.CREATE_TOPICS, 7, create).topics] == [0]
    assert _partition(controller, "pref").leader_id == 0
    assert _elect(controller, "pref") == [(0, Errors.ELECTION_NOT_NEEDED)]
    assert _elect(controller, "pref", UNCLEAN) == [(0, Errors.ELECTION_NOT_NEEDED)]

    # Same replicas, new order: every target replica is in the ISR, so it completes at once.
    reassign = AlterPartitionReassignmentsRequest(timeout_ms=15000, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name="pref", partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=[1, 0, 2])])])
    response = controller.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign)
    assert [[p.error_code for p in t.partitions] for t in response.responses] == [[0]]
    wait_for(lambda: _partition(controller, "pref").replica_nodes == [1, 0, 2])
    listed = controller.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest(topics=None))
    assert listed.topics == []

    assert _elect(controller, "pref") == [(0, Errors.NONE)]
    # The response waited until this broker's metadata showed the new leader.
    assert _partition(controller, "pref").leader_id == 1


def test_preferred_leader_not_available(cluster3: BrokerCluster) -> None:
    controller = _controller(cluster3)
    preferred = next(b for b in cluster3.brokers if b is not controller)
    create = CreateTopicsRequest(timeout_ms=15000, topics=[CreateTopicsRequest.CreatableTopic(
        name="gone", num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
            partition_index=0, broker_ids=[preferred.broker_id, controller.broker_id])])])
    assert [t.error_code for t in controller.request(ApiKey.CREATE_TOPICS, 7, create).topics] == [0]
    preferred.stop()
    wait_for(lambda: _partition(controller, "gone").leader_id == controller.broker_id)
    assert _elect(controller, "gone") == [(0, Errors.PREFERRED_LEADER_NOT_AVAILABLE)]


def test_describe_cluster_endpoint_types_and_operations(cluster3: BrokerCluster) -> None:
    broker = cluster3.brokers[1]
    response = broker.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))
    assert response.error_code == 0
    assert sorted(b.broker_id for b in response.brokers) == [0, 1, 2]
    assert response.controller_id == _controller(cluster3).broker_id
    assert response.cluster_authorized_operations == 8096
    plain = broker.request(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest(include_cluster_authorized_operations=False))
    assert plain.cluster_authorized_operations == -(2**31)
    assert plain.cluster_id == response.cluster_id
    controller_endpoint = broker.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2))
    assert controller_endpoint.error_code == Errors.MISMATCHED_ENDPOINT_TYPE
    unknown = broker.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=7))
    assert unknown.error_code == Errors.UNSUPPORTED_ENDPOINT_TYPE
