"""Partition reassignment through the API and the legacy znode, surviving a controller failover."""
from __future__ import annotations

import json

from kazoo.client import KazooClient

from coordination.admin_zk_client import NewTopic
from coordination.model import LeaderAndIsr, ReplicaAssignment, TopicPartition
from coordination.zk_data import partition_state_path
from tests.harness.waiting import wait_for
from tests.harness.zk_cluster import Cluster

TP = TopicPartition("move", 0)


def read(cluster: Cluster, path: str) -> dict | None:
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        stat = client.exists(path)
        return None if stat is None else json.loads(client.get(path)[0])
    finally:
        client.stop()


def report_isr(cluster: Cluster, isr: tuple[int, ...]) -> None:
    """What the partition leader does once followers caught up: AlterPartition to the controller."""
    controller = cluster.active_controller()
    state = controller.context.leadership[TP].leader_and_isr
    proposal = LeaderAndIsr(state.leader, state.leader_epoch, isr, partition_epoch=state.partition_epoch)
    result = controller.alter_partition(state.leader, cluster.brokers[state.leader].epoch, {TP: proposal}).result(10)
    assert not isinstance(result[TP], Exception), result


def test_reassignment_survives_controller_failover(cluster: Cluster) -> None:
    cluster.add_broker(1, controller=True)
    wait_for(lambda: cluster.active_controller() is not None, what="controller 1")
    cluster.add_broker(2, controller=True)
    cluster.add_broker(3)
    first = cluster.active_controller()
    wait_for(lambda: len(first.context.live_brokers) == 3, what="3 brokers")
    first.create_topics([NewTopic("move", assignment={0: [1, 2]})])
    wait_for(lambda: TP in first.context.leadership, what="topic")
    assert first.alter_partition_reassignments({TP: (2, 3)}).result(10) == {TP: None}
    topic = read(cluster, "/brokers/topics/move")
    assert (topic["partitions"], topic["adding_replicas"], topic["removing_replicas"]) == (
        {"0": [2, 3, 1]}, {"0": [3]}, {"0": [1]}
    )
    assert first.list_partition_reassignments().result(10) == {
        TP: ReplicaAssignment((2, 3, 1), (3,), (1,))
    }
    assert read(cluster, partition_state_path("move", 0))["leader_epoch"] == 1

    cluster.stop_broker(1)  # the controller dies midway
    wait_for(lambda: cluster.active_controller() is not None, what="controller 2")
    second = cluster.active_controller()
    assert second.broker_id == 2
    wait_for(lambda: second.context.leadership.get(TP) and second.context.leadership[TP].leader_and_isr.leader == 2,
               what="leader 2")
    assert second.list_partition_reassignments().result(10) == {TP: ReplicaAssignment((2, 3, 1), (3,), (1,))}
    report_isr(cluster, (2, 3))
    wait_for(lambda: read(cluster, "/brokers/topics/move")["adding_replicas"] == {}, what="completion")
    topic = read(cluster, "/brokers/topics/move")
    assert (topic["partitions"], topic["removing_replicas"]) == ({"0": [2, 3]}, {})
    state = read(cluster, partition_state_path("move", 0))
    assert state["leader"] == 2 and state["isr"] == [2, 3]
    assert second.list_partition_reassignments().result(10) == {}


def test_legacy_reassignment_znode(cluster: Cluster) -> None:
    cluster.add_broker(1, controller=True)
    cluster.add_broker(2)
    cluster.add_broker(3)
    wait_for(lambda: cluster.active_controller() is not None, what="controller")
    controller = cluster.active_controller()
    wait_for(lambda: len(controller.context.live_brokers) == 3, what="3 brokers")
    controller.create_topics([NewTopic("move", assignment={0: [1, 2]})])
    wait_for(lambda: TP in controller.context.leadership, what="topic")
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        client.create(
            "/admin/reassign_partitions",
            b'{"version":1,"partitions":[{"topic":"move","partition":0,"replicas":[3,1]}]}',
        )
        wait_for(lambda: read(cluster, "/brokers/topics/move")["adding_replicas"] == {"0": [3]}, what="phase A")
        wait_for(lambda: controller.context.leadership[TP].leader_and_isr.leader_epoch == 1, what="epoch bump")
        report_isr(cluster, (1, 2, 3))
        wait_for(lambda: client.exists("/admin/reassign_partitions") is None, what="trigger removed")
        topic = read(cluster, "/brokers/topics/move")
        assert (topic["partitions"], topic["adding_replicas"], topic["removing_replicas"]) == ({"0": [3, 1]}, {}, {})
        # Leader 1 stays (it is in the target set); broker 2 left the ISR.
        assert read(cluster, partition_state_path("move", 0))["isr"] == [1, 3]
    finally:
        client.stop()
