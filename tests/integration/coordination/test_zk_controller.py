"""The controller against a real ZooKeeper: exact znode values after topic creation, partition
increase, deletion and leader change; topics written directly; malformed znodes."""
from __future__ import annotations

import json

from kazoo.client import KazooClient

from coordination.admin_zk_client import NewTopic
from coordination.controller.kafka_controller import ControllerConfig
from coordination.errors import TopicExistsError
from coordination.model import LeaderAndIsr, TopicPartition
from coordination.zk_data import partition_state_path
from tests.harness.controller_request_sink import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer
from tests.harness.zk_cluster import Cluster


def raw(cluster: Cluster) -> KazooClient:
    client = KazooClient(cluster.connect)
    client.start(5)
    return client


def znode(client: KazooClient, path: str) -> bytes | None:
    stat = client.exists(path)
    return None if stat is None else client.get(path)[0]


def start_three(cluster: Cluster) -> None:
    cluster.add_broker(1, controller=True)
    cluster.add_broker(2)
    cluster.add_broker(3)
    wait_for(lambda: cluster.active_controller() is not None, what="an active controller")
    controller = cluster.active_controller()
    wait_for(lambda: len(controller.context.live_brokers) == 3, what="the controller to see 3 brokers")


def test_topic_creation_writes_kafka_znodes_and_sends_leader_and_isr(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    assert controller.create_topics([NewTopic("orders", 3, 2, configs={"retention.ms": "1000"})]) == {"orders": None}
    zk = raw(cluster)
    try:
        wait_for(lambda: all(znode(zk, partition_state_path("orders", p)) for p in range(3)), what="states")
        topic = json.loads(znode(zk, "/brokers/topics/orders"))
        assert list(topic) == ["version", "topic_id", "partitions", "adding_replicas", "removing_replicas"]
        assert topic["version"] == 3 and len(topic["topic_id"]) == 22
        assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
        assignment = {int(p): r for p, r in topic["partitions"].items()}
        assert sorted(assignment) == [0, 1, 2] and all(len(set(r)) == 2 for r in assignment.values())
        assert znode(zk, "/config/topics/orders") == b'{"version":1,"config":{"retention.ms":"1000"}}'
        for p, replicas in assignment.items():
            expected = (
                '{"controller_epoch":1,"leader":%d,"version":1,"leader_epoch":0,"isr":[%s]}'
                % (replicas[0], ",".join(map(str, replicas)))
            ).encode()
            assert znode(zk, partition_state_path("orders", p)) == expected
    finally:
        zk.stop()
    for broker_id in (1, 2, 3):
        sink = cluster.brokers[broker_id].sink
        wait_for(lambda: sink.received(UPDATE_METADATA), what=f"UpdateMetadata at broker {broker_id}")
    hosting = {b for r in assignment.values() for b in r}
    for broker_id in hosting:
        sink = cluster.brokers[broker_id].sink
        wait_for(lambda: sink.received(LEADER_AND_ISR), what=f"LeaderAndIsr at broker {broker_id}")
        request = sink.received(LEADER_AND_ISR)[0]
        assert request.controller_id == 1 and request.controller_epoch == 1
        assert request.broker_epoch == cluster.brokers[broker_id].epoch
        states = [s for t in request.topic_states for s in t.partition_states]
        assert states and all(s.is_new for s in states)
        assert {s.partition_index for s in states} == {p for p, r in assignment.items() if broker_id in r}
    assert isinstance(controller.create_topics([NewTopic("orders", 1, 1)])["orders"], TopicExistsError)


def test_topic_written_directly_is_picked_up_and_gets_a_topic_id(cluster: Cluster) -> None:
    start_three(cluster)
    zk = raw(cluster)
    try:
        zk.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[2,3],"1":[3,1]}}')
        wait_for(lambda: znode(zk, partition_state_path("legacy", 1)), what="legacy topic states")
        assert znode(zk, partition_state_path("legacy", 0)) == (
            b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3]}'
        )
        topic = json.loads(znode(zk, "/brokers/topics/legacy"))
        assert topic["version"] == 3 and len(topic["topic_id"]) == 22
        assert topic["partitions"] == {"0": [2, 3], "1": [3, 1]}
    finally:
        zk.stop()


def test_partition_increase(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    controller.create_topics([NewTopic("grow", 2, 3)])
    zk = raw(cluster)
    try:
        wait_for(lambda: znode(zk, partition_state_path("grow", 1)), what="initial partitions")
        before = json.loads(znode(zk, "/brokers/topics/grow"))
        assert controller.create_partitions({"grow": (4, None)}) == {"grow": None}
        wait_for(lambda: znode(zk, partition_state_path("grow", 3)), what="new partitions")
        after = json.loads(znode(zk, "/brokers/topics/grow"))
        assert after["topic_id"] == before["topic_id"]
        assert sorted(after["partitions"]) == ["0", "1", "2", "3"]
        assert {k: after["partitions"][k] for k in ("0", "1")} == before["partitions"]
        leader = after["partitions"]["3"][0]
        assert json.loads(znode(zk, partition_state_path("grow", 3))) == {
            "controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 0,
            "isr": after["partitions"]["3"],
        }
        assert controller.create_partitions({"grow": (3, None)})["grow"].kafka_error == "INVALID_PARTITIONS"
    finally:
        zk.stop()


def test_topic_deletion_removes_every_znode(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    controller.create_topics([NewTopic("doomed", 2, 2)])
    zk = raw(cluster)
    try:
        wait_for(lambda: znode(zk, partition_state_path("doomed", 1)), what="topic")
        assert controller.delete_topics(["doomed"]) == {"doomed": None}
        wait_for(lambda: zk.exists("/brokers/topics/doomed") is None, what="topic znode removal")
        wait_for(lambda: zk.exists("/admin/delete_topics/doomed") is None, what="marker removal")
        assert zk.exists("/config/topics/doomed") is None
        # The controller thread forgets the topic right after deleting its znodes.
        wait_for(lambda: "doomed" not in controller.context.all_topics, what="topic forgotten")
    finally:
        zk.stop()
    stop_requests = [r for b in cluster.brokers.values() for r in b.sink.received(STOP_REPLICA)]
    deletes = [
        (t.topic_name, p.partition_index)
        for r in stop_requests for t in r.topic_states for p in t.partition_states if p.delete_partition
    ]
    assert sorted(set(deletes)) == [("doomed", 0), ("doomed", 1)]
    assert len(deletes) == 4  # every replica of both partitions


def test_leader_change_when_a_broker_registration_disappears(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    assert controller.create_topics(
        [NewTopic("moving", assignment={0: [3, 2], 1: [2, 3]}), NewTopic("single", assignment={0: [3]})]
    ) == {"moving": None, "single": None}
    zk = raw(cluster)
    try:
        wait_for(lambda: znode(zk, partition_state_path("single", 0)), what="topic")
        cluster.stop_broker(3)
        wait_for(lambda: json.loads(znode(zk, partition_state_path("moving", 0)))["leader"] == 2, what="new leader")
        assert znode(zk, partition_state_path("moving", 0)) == (
            b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}'
        )
        wait_for(lambda: json.loads(znode(zk, partition_state_path("moving", 1)))["isr"] == [2], what="ISR shrink")
        assert znode(zk, partition_state_path("moving", 1)) == (
            b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}'
        )
        wait_for(lambda: json.loads(znode(zk, partition_state_path("single", 0)))["leader"] == -1, what="offline")
        assert znode(zk, partition_state_path("single", 0)) == (
            b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":1,"isr":[3]}'
        )
        # Broker 3 returns: the offline partition comes back with its old leader.
        cluster.add_broker(3)
        wait_for(lambda: json.loads(znode(zk, partition_state_path("single", 0)))["leader"] == 3, what="return")
        assert znode(zk, partition_state_path("single", 0)) == (
            b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":2,"isr":[3]}'
        )
    finally:
        zk.stop()


def test_preferred_replica_election_through_the_api(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    controller.create_topics([NewTopic("pref", assignment={0: [3, 2]})])
    zk = raw(cluster)
    try:
        wait_for(lambda: znode(zk, partition_state_path("pref", 0)), what="topic")
        cluster.stop_broker(3)
        wait_for(lambda: json.loads(znode(zk, partition_state_path("pref", 0)))["leader"] == 2, what="failover")
        cluster.add_broker(3)
        tp = TopicPartition("pref", 0)
        wait_for(lambda: 3 in controller.context.live_brokers, what="broker 3 back")
        # Broker 3 is back but not in the ISR: the preferred leader is not eligible yet.
        result = controller.elect_leaders({tp}).result(10)
        assert result[tp].kafka_error == "PREFERRED_LEADER_NOT_AVAILABLE"
        state = controller.context.leadership[tp].leader_and_isr
        grown = LeaderAndIsr(2, state.leader_epoch, (2, 3), partition_epoch=state.partition_epoch)
        altered = controller.alter_partition(2, cluster.brokers[2].epoch, {tp: grown}).result(10)
        assert altered[tp].isr == (2, 3)
        assert controller.elect_leaders({tp}).result(10) == {tp: None}
        assert json.loads(znode(zk, partition_state_path("pref", 0)))["leader"] == 3
        assert controller.elect_leaders({tp}).result(10)[tp].kafka_error == "ELECTION_NOT_NEEDED"
    finally:
        zk.stop()


def test_malformed_znodes_are_ignored(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    zk = raw(cluster)
    try:
        zk.create("/brokers/topics/broken", b"{not json")
        zk.create("/admin/preferred_replica_election", b"garbage")
        controller.create_topics([NewTopic("fine", 1, 1)])
        wait_for(lambda: znode(zk, partition_state_path("fine", 0)), what="a good topic despite bad ones")
        wait_for(lambda: zk.exists("/admin/preferred_replica_election") is None, what="bad trigger removed")
        assert controller.is_active
        zk.set("/brokers/topics/broken", b'{"version":1,"partitions":{"0":[1]}}')
        wait_for(lambda: znode(zk, partition_state_path("broken", 0)), what="fixed topic picked up")
    finally:
        zk.stop()


def test_auto_leader_rebalance_restores_preferred_leaders(cluster: Cluster) -> None:
    config = ControllerConfig(auto_leader_rebalance_enable=True, leader_imbalance_check_interval_seconds=0.2)
    cluster.add_broker(1, controller=True, config=config)
    cluster.add_broker(2)
    wait_for(lambda: cluster.active_controller() is not None, what="controller")
    controller = cluster.active_controller()
    wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2")
    controller.create_topics([NewTopic("rebalance", assignment={0: [2, 1]})])
    tp = TopicPartition("rebalance", 0)
    wait_for(lambda: tp in controller.context.leadership, what="topic")
    cluster.stop_broker(2)
    wait_for(lambda: controller.context.leadership[tp].leader_and_isr.leader == 1, what="failover to 1")
    cluster.add_broker(2)
    wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2 back")
    state = controller.context.leadership[tp].leader_and_isr
    proposal = LeaderAndIsr(1, state.leader_epoch, (1, 2), partition_epoch=state.partition_epoch)
    controller.alter_partition(1, cluster.brokers[1].epoch, {tp: proposal}).result(10)
    wait_for(lambda: controller.context.leadership[tp].leader_and_isr.leader == 2, what="preferred leader back")


def test_controller_keeps_working_after_a_zookeeper_outage(zookeeper: ZooKeeperServer) -> None:
    cluster = Cluster(zookeeper.connect_string_with_chroot("outage"))
    try:
        cluster.add_broker(1, controller=True)
        cluster.add_broker(2)
        wait_for(lambda: cluster.active_controller() is not None, what="controller")
        controller = cluster.active_controller()
        wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2")
        zookeeper.stop()
        assert controller.is_active  # losing the connection alone gives nothing up
        zookeeper.start()
        wait_for(lambda: controller.zk.zk.connected, what="reconnect")
        # A slow restart may outlast the session: then the brokers re-register and a
        # controller is elected again. Either way exactly one controller serves.
        wait_for(lambda: cluster.active_controller() is not None, what="active controller after the outage")
        controller = cluster.active_controller()
        wait_for(lambda: len(controller.context.live_brokers) == 2, what="both brokers live")
        assert controller.create_topics([NewTopic("after-outage", 1, 2)]) == {"after-outage": None}
        tp = TopicPartition("after-outage", 0)
        wait_for(lambda: tp in controller.context.leadership, what="topic after the outage")
        assert controller.is_active
    finally:
        cluster.close()


def test_deletion_waits_for_a_dead_replica_and_completes_when_it_returns(cluster: Cluster) -> None:
    start_three(cluster)
    controller = cluster.active_controller()
    controller.create_topics([NewTopic("patient", assignment={0: [2, 3]})])
    zk = raw(cluster)
    try:
        wait_for(lambda: znode(zk, partition_state_path("patient", 0)), what="topic")
        cluster.stop_broker(3)
        wait_for(lambda: 3 not in controller.context.live_brokers, what="broker 3 gone")
        assert controller.delete_topics(["patient"]) == {"patient": None}
        wait_for(lambda: "patient" in controller.context.topics_ineligible_for_deletion, what="ineligible")
        assert zk.exists("/brokers/topics/patient") is not None
        assert zk.exists("/admin/delete_topics/patient") is not None
        cluster.add_broker(3)
        wait_for(lambda: zk.exists("/brokers/topics/patient") is None, what="deletion after broker 3 returns")
        wait_for(lambda: zk.exists("/admin/delete_topics/patient") is None, what="marker removal")
    finally:
        zk.stop()
