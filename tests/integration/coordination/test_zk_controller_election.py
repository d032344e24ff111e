"""Controller election, takeover and fencing between in-process controllers on a real ZooKeeper."""
from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from coordination.admin_zk_client import NewTopic
from coordination.errors import ControllerMovedError, NotControllerError
from coordination.model import LeaderAndIsr, TopicPartition
from coordination.zk_data import partition_state_path
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import expire_session
from tests.harness.zk_cluster import Cluster


def controller_znode(cluster: Cluster) -> tuple[dict, bytes]:
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        return json.loads(client.get("/controller")[0]), client.get("/controller_epoch")[0]
    finally:
        client.stop()


def test_only_one_controller_and_takeover_when_it_dies(cluster: Cluster) -> None:
    for broker_id in (1, 2, 3):
        cluster.add_broker(broker_id, controller=True)
    wait_for(lambda: cluster.active_controller() is not None, what="one active controller")
    first = cluster.active_controller()
    value, epoch = controller_znode(cluster)
    assert value["brokerid"] == first.broker_id and value["version"] == 2 and epoch == b"1"
    assert list(value) == ["version", "brokerid", "timestamp", "kraftControllerEpoch"]
    assert value["kraftControllerEpoch"] == -1 and value["timestamp"].isdigit()
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        assert client.get("/feature")[0] == b'{"version":2,"status":1,"features":{}}'
        # the same content as Kafka orders it: a new controller leaves it (and its epoch) as it is
        client.set("/feature", b'{"features":{},"version":2,"status":1}')
    finally:
        client.stop()
    others = [b.controller for b in cluster.brokers.values() if b.controller is not first]
    wait_for(lambda: all(c.active_controller_id == first.broker_id for c in others), what="followers")
    with pytest.raises(NotControllerError):
        others[0].create_topics([NewTopic("x", 1, 1)])
    cluster.stop_broker(first.broker_id)
    wait_for(lambda: cluster.active_controller() is not None, what="a new controller")
    second = cluster.active_controller()
    assert second is not first and second.epoch == 2
    assert controller_znode(cluster)[1] == b"2"
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        value, stat = client.get("/feature")
        assert (value, stat.version) == (b'{"features":{},"version":2,"status":1}', 1)
    finally:
        client.stop()
    # The new controller manages the cluster: topic creation works through it.
    assert second.create_topics([NewTopic("after", 1, 2)]) == {"after": None}
    wait_for(lambda: TopicPartition("after", 0) in second.context.leadership, what="leader for new topic")


def test_expired_controller_is_fenced_and_stops_acting(cluster: Cluster) -> None:
    cluster.add_broker(1, controller=True)
    wait_for(lambda: cluster.active_controller() is not None, what="controller 1")
    cluster.add_broker(2, controller=True)
    old = cluster.brokers[1].controller
    old.create_topics([NewTopic("fenced", 1, 2)])
    tp = TopicPartition("fenced", 0)
    wait_for(lambda: tp in old.context.leadership, what="topic")
    stale_zk_version = old.context.epoch_zk_version
    state = old.context.leadership[tp].leader_and_isr

    old_zk = cluster.brokers[1].zk
    expire_session(cluster.connect.split("/")[0], old_zk.zk.session_id, old_zk.zk.session_password)
    new = cluster.brokers[2].controller
    # Broker 1 lost /controller with its session: broker 2 wins with a higher epoch, and broker 1
    # (re-registered on a new session) does not act as controller any more.
    wait_for(lambda: new.is_active, what="broker 2 to take over")
    assert new.epoch == 2
    wait_for(lambda: not old.is_active and old.active_controller_id == 2, what="broker 1 to step down")
    # A write with the old controller epoch zkVersion is rejected by ZooKeeper itself.
    with pytest.raises(ControllerMovedError):
        old_zk.update_leader_and_isr({tp: state.new_leader_and_isr(state.leader, state.isr)}, 1, stale_zk_version)
    wait_for(lambda: 1 in new.context.live_brokers, what="broker 1 re-registered")


def test_controller_rejects_stale_broker_epoch(cluster: Cluster) -> None:
    cluster.add_broker(1, controller=True)
    cluster.add_broker(2)
    wait_for(lambda: cluster.active_controller() is not None, what="controller")
    controller = cluster.active_controller()
    wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2")
    controller.create_topics([NewTopic("epochs", assignment={0: [2, 1]})])
    tp = TopicPartition("epochs", 0)
    wait_for(lambda: tp in controller.context.leadership, what="topic")
    state = controller.context.leadership[tp].leader_and_isr
    proposal = LeaderAndIsr(2, state.leader_epoch, (2,), partition_epoch=state.partition_epoch)
    with pytest.raises(Exception) as stale:
        controller.alter_partition(2, cluster.brokers[2].epoch - 1, {tp: proposal}).result(10)
    assert getattr(stale.value, "kafka_error", None) == "STALE_BROKER_EPOCH"
    result = controller.alter_partition(2, cluster.brokers[2].epoch, {tp: proposal}).result(10)
    assert result[tp].isr == (2,) and result[tp].partition_epoch == state.partition_epoch + 1


def test_controlled_shutdown_moves_leadership(cluster: Cluster) -> None:
    cluster.add_broker(1, controller=True)
    cluster.add_broker(2)
    wait_for(lambda: cluster.active_controller() is not None, what="controller")
    controller = cluster.active_controller()
    wait_for(lambda: 2 in controller.context.live_brokers, what="broker 2")
    controller.create_topics([NewTopic("cs", assignment={0: [2, 1], 1: [1, 2]})])
    wait_for(lambda: len(controller.context.leadership) == 2, what="topic")
    remaining = controller.controlled_shutdown(2, cluster.brokers[2].epoch).result(10)
    assert remaining == set()
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        assert client.get(partition_state_path("cs", 0))[0] == (
            b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[1]}'
        )
        assert json.loads(client.get(partition_state_path("cs", 1))[0])["isr"] == [1]
    finally:
        client.stop()
