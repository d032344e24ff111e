"""Many leader changes in a row on real brokers: each one makes the followers drop the fetcher of
the old leader while that leader answers their in-flight fetch (it just stopped leading), and
every change must still reach every broker and leave the partition writable."""
from __future__ import annotations

import uuid

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AlterPartitionReassignmentsRequest, ElectLeadersRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    StartCluster,
    controller_id,
    create_topic,
    produce_raw,
    read_partition,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
pytest.importorskip("confluent_kafka")

ROUNDS = 15
PREFERRED = 0


def _reorder(controller: BrokerProcess, topic: str, replicas: list[int]) -> None:
    response = controller.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
        timeout_ms=15000, topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=replicas)])]))
    assert [p.error_code for t in response.responses for p in t.partitions] == [0]


def _elect_preferred(controller: BrokerProcess, topic: str) -> int:
    request = ElectLeadersRequest(election_type=PREFERRED, timeout_ms=15000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[0])])
    # The broker answers once its own metadata shows the new leader (or REQUEST_TIMED_OUT at 15s).
    (result,) = controller.request(ApiKey.ELECT_LEADERS, 2, request, timeout=25).replica_election_results
    (partition,) = result.partition_result
    return partition.error_code


def test_repeated_preferred_elections_reach_every_broker(start_cluster: StartCluster, zk_connect: str) -> None:
    cluster = start_cluster(3)
    controller = cluster.brokers[controller_id(cluster)]
    topic = f"churn-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [0, 1, 2])
    written: list[bytes] = []
    with zk_reader(zk_connect) as zk:
        wait_for_isr(cluster, zk, topic, [0, 1, 2])
        for round_number in range(ROUNDS):
            replicas = [(round_number + 1 + i) % 3 for i in range(3)]
            _reorder(controller, topic, replicas)
            wait_for(lambda: zk.assignment(topic) == replicas, f"assignment {replicas}")
            assert _elect_preferred(controller, topic) == Errors.NONE, f"round {round_number}: election to {replicas[0]}"
            view = wait_for_isr(cluster, zk, topic, [0, 1, 2])
            assert view.leader == replicas[0]
            value = b"round-%d" % round_number
            assert produce_raw(cluster.brokers[view.leader], topic, [value], acks=-1).error_code == Errors.NONE
            written.append(value)
    assert read_partition(cluster.bootstrap, topic) == written
