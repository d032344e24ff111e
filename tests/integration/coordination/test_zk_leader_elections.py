"""Partition leader elections driven by znodes: the legacy preferred-election trigger, legacy ISR
change notifications, and unclean election enabled per topic."""
from __future__ import annotations

import json

from kazoo.client import KazooClient

from coordination.admin_zk_client import AdminZkClient, NewTopic
from coordination.controller.kafka_controller import KafkaController
from coordination.model import LeaderAndIsr, TopicPartition
from coordination.zk_admin_data import encode_log_dir_event
from coordination.zk_data import encode_partition_state, partition_state_path
from tests.harness.controller_request_sink import UPDATE_METADATA
from tests.harness.waiting import wait_for
from tests.harness.zk_cluster import Cluster


def start(cluster: Cluster, brokers: int = 2) -> KafkaController:
    cluster.add_broker(1, controller=True)
    for broker_id in range(2, brokers + 1):
        cluster.add_broker(broker_id)
    wait_for(lambda: cluster.active_controller() is not None, what="controller")
    controller = cluster.active_controller()
    assert controller is not None
    wait_for(lambda: len(controller.context.live_brokers) == brokers, what="brokers")
    return controller


def test_preferred_replica_election_znode(cluster: Cluster) -> None:
    controller = start(cluster)
    controller.create_topics([NewTopic("pz", assignment={0: [2, 1]})])
    tp = TopicPartition("pz", 0)
    wait_for(lambda: tp in controller.context.leadership, what="topic")
    # The preferred leader fails and returns; leader 1 lets it back into the ISR.
    cluster.stop_broker(2)
    wait_for(lambda: controller.context.leadership[tp].leader_and_isr.leader == 1, what="failover")
    cluster.add_broker(2)
    wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2 back")
    state = controller.context.leadership[tp].leader_and_isr
    proposal = LeaderAndIsr(1, state.leader_epoch, (1, 2), partition_epoch=state.partition_epoch)
    controller.alter_partition(1, cluster.brokers[1].epoch, {tp: proposal}).result(10)
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        client.create("/admin/preferred_replica_election", b'{"version":1,"partitions":[{"topic":"pz","partition":0}]}')
        wait_for(lambda: client.exists("/admin/preferred_replica_election") is None, what="trigger handled")
        assert json.loads(client.get(partition_state_path("pz", 0))[0]) == {
            "controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 2, "isr": [1, 2]
        }
    finally:
        client.stop()


def test_legacy_isr_change_notification_is_propagated(cluster: Cluster) -> None:
    controller = start(cluster)
    controller.create_topics([NewTopic("isr", assignment={0: [1, 2]})])
    tp = TopicPartition("isr", 0)
    wait_for(lambda: tp in controller.context.leadership, what="topic")
    sink = cluster.brokers[2].sink
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        # An old-IBP leader shrinks the ISR itself, then tells the controller.
        data, stat = client.get(partition_state_path("isr", 0))
        client.set(partition_state_path("isr", 0), encode_partition_state(LeaderAndIsr(1, 0, (1,)), 1), stat.version)
        before = len(sink.received(UPDATE_METADATA))
        client.create(
            "/isr_change_notification/isr_change_",
            b'{"version":1,"partitions":[{"topic":"isr","partition":0}]}',
            sequence=True,
        )
        wait_for(lambda: controller.context.leadership[tp].leader_and_isr.isr == (1,), what="ISR refreshed")
        wait_for(lambda: client.get_children("/isr_change_notification") == [], what="notification deleted")
        wait_for(lambda: len(sink.received(UPDATE_METADATA)) > before, what="UpdateMetadata to broker 2")
        latest = sink.received(UPDATE_METADATA)[-1]
        assert [p.isr for t in latest.topic_states for p in t.partition_states] == [[1]]
    finally:
        client.stop()


def test_unclean_leader_election_enabled_per_topic(cluster: Cluster) -> None:
    controller = start(cluster, brokers=3)
    admin = AdminZkClient(controller.zk)
    for topic in ("clean", "unclean"):
        controller.create_topics([NewTopic(topic, assignment={0: [2, 3]})])
    admin.change_configs("topics", "unclean", {"unclean.leader.election.enable": "true"})
    wait_for(lambda: len(controller.context.leadership) == 2, what="topics")
    for tp in (TopicPartition("clean", 0), TopicPartition("unclean", 0)):
        state = controller.context.leadership[tp].leader_and_isr
        # The ISR has shrunk to the leader (broker 3 fell behind), then the leader dies.
        proposal = LeaderAndIsr(2, state.leader_epoch, (2,), partition_epoch=state.partition_epoch)
        controller.alter_partition(2, cluster.brokers[2].epoch, {tp: proposal}).result(10)
    cluster.stop_broker(2)
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        wait_for(lambda: json.loads(client.get(partition_state_path("unclean", 0))[0])["leader"] == 3,
                   what="unclean election")
        assert json.loads(client.get(partition_state_path("unclean", 0))[0]) == {
            "controller_epoch": 1, "leader": 3, "version": 1, "leader_epoch": 1, "isr": [3],
            "leader_recovery_state": 1,
        }
        wait_for(lambda: json.loads(client.get(partition_state_path("clean", 0))[0])["leader"] == -1,
                   what="clean partition offline")
        assert json.loads(client.get(partition_state_path("clean", 0))[0])["isr"] == [2]
    finally:
        client.stop()


def test_log_dir_failure_moves_leadership_off_the_failed_replicas(cluster: Cluster) -> None:
    controller = start(cluster)
    controller.create_topics([NewTopic("disk", assignment={0: [2, 1], 1: [2, 1]})])
    wait_for(lambda: len(controller.context.leadership) == 2, what="topic")
    # Partition 0 of broker 2 lived on the log dir that failed.
    cluster.brokers[2].sink.storage_errors.add(("disk", 0))
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        client.create("/log_dir_event_notification/log_dir_event_", encode_log_dir_event(2), sequence=True)
        wait_for(lambda: json.loads(client.get(partition_state_path("disk", 0))[0])["leader"] == 1,
                   what="leader moved off the failed dir")
        assert json.loads(client.get(partition_state_path("disk", 0))[0]) == {
            "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1]
        }
        assert json.loads(client.get(partition_state_path("disk", 1))[0])["leader"] == 2
        wait_for(lambda: client.get_children("/log_dir_event_notification") == [], what="notification deleted")
    finally:
        client.stop()
