"""Unclean leader election on real brokers.

The layout of every test: an RF=2 partition led by broker A with follower B (neither is the
controller). B is stopped and leaves the ISR; A takes more writes (acknowledged, acks=all, as
the ISR is just A and min.insync.replicas is 1); A is stopped; B, whose log lacks those writes,
is started again. With unclean.leader.election.enable=false (Kafka's default) the partition
stays offline rather than make B leader; with it true, B leads and the writes B never had are
lost, on B and (after truncation) on A.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from protocol.errors import Errors
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    StartCluster,
    ZkReader,
    agreed_state,
    controller_id,
    create_topic,
    metadata_view,
    produce_raw,
    read_partition,
    segment_files,
    segments_identical,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

BEFORE = [b"before-%d" % i for i in range(10)]  # on both replicas
AFTER = [b"after-%d" % i for i in range(10)]  # only on A: written while B was down


@dataclass
class Stranded:
    controller: BrokerProcess
    a: BrokerProcess  # the last leader, now stopped
    b: BrokerProcess  # the stale replica, running again


def _strand_stale_replica(cluster: BrokerCluster, zk: ZkReader, topic: str,
                          configs: dict[str, str] | None = None) -> Stranded:
    controller = cluster.brokers[controller_id(cluster)]
    a, b = (broker for broker in cluster.brokers if broker is not controller)
    create_topic(cluster, topic, [a.broker_id, b.broker_id], configs)
    wait_for_isr(cluster, zk, topic, [a.broker_id, b.broker_id])
    assert produce_raw(a, topic, BEFORE, acks=-1).error_code == Errors.NONE

    assert b.stop() == 0
    wait_for_isr(cluster, zk, topic, [a.broker_id])
    assert produce_raw(a, topic, AFTER, acks=-1).error_code == Errors.NONE  # acknowledged by the whole ISR

    a.stop()
    # No replica left to lead: ZooKeeper keeps the last ISR ([A]) and records no leader.
    offline = wait_for(lambda: (v := agreed_state(cluster, zk, topic)) is not None and v.leader == -1 and v,
                       "the partition to go offline")
    assert offline.isr == (a.broker_id,)
    assert offline.error_code == Errors.LEADER_NOT_AVAILABLE

    b.start()
    return Stranded(controller, a, b)


def _sync_with_controller(cluster: BrokerCluster, controller: BrokerProcess) -> None:
    """Return once the controller has finished handling B's registration: a topic created now is
    handled after it, and every broker sees its leader only after any election that came first."""
    create_topic(cluster, f"marker-{uuid.uuid4().hex[:8]}", [controller.broker_id])


def test_without_unclean_election_the_stale_replica_is_not_elected(start_cluster: StartCluster,
                                                                   zk_connect: str) -> None:
    cluster = start_cluster(3)
    topic = f"clean-{uuid.uuid4().hex[:8]}"
    with zk_reader(zk_connect) as zk:
        s = _strand_stale_replica(cluster, zk, topic)
        _sync_with_controller(cluster, s.controller)
        for broker in (s.controller, s.b):
            view = metadata_view(broker, topic)
            assert view is not None and (view.leader, view.error_code) == (-1, Errors.LEADER_NOT_AVAILABLE), \
                f"broker {broker.broker_id} shows {view}"
        state = zk.partition_state(topic)
        assert state is not None and (state["leader"], state["isr"]) == (-1, [s.a.broker_id])
        assert produce_raw(s.b, topic, [b"x"], acks=1).error_code == Errors.NOT_LEADER_OR_FOLLOWER

        # The partition waits for its last in-sync replica, which has everything.
        s.a.start()
        wait_for_isr(cluster, zk, topic, [s.a.broker_id, s.b.broker_id])
        assert metadata_view(s.controller, topic).leader == s.a.broker_id  # type: ignore[union-attr]
    assert read_partition(cluster.bootstrap, topic) == BEFORE + AFTER
    wait_for(lambda: segments_identical([s.a, s.b], topic), "identical segments on both replicas")


def _check_unclean_outcome(cluster: BrokerCluster, zk: ZkReader, topic: str, s: Stranded) -> None:
    """B leads with only what it had: exactly the writes it missed are gone, and stay gone once A
    returns (A truncates to B's log and copies B's new writes)."""
    elected = wait_for(lambda: (v := agreed_state(cluster, zk, topic)) is not None and v.leader >= 0 and v,
                       "a leader")
    assert (elected.leader, elected.isr) == (s.b.broker_id, (s.b.broker_id,))
    assert read_partition(s.b.bootstrap, topic) == BEFORE  # AFTER was acknowledged and is lost
    new = [b"new-%d" % i for i in range(5)]
    assert produce_raw(s.b, topic, new, acks=-1).error_code == Errors.NONE

    s.a.start()
    wait_for_isr(cluster, zk, topic, [s.a.broker_id, s.b.broker_id])
    assert read_partition(cluster.bootstrap, topic) == BEFORE + new
    wait_for(lambda: segments_identical([s.a, s.b], topic), "identical segments on both replicas")
    assert not any(b"after-" in data for data in segment_files(s.a, topic).values()), \
        "A kept writes the new leader never had"


def test_unclean_election_enabled_at_creation_elects_the_stale_replica(start_cluster: StartCluster,
                                                                       zk_connect: str) -> None:
    cluster = start_cluster(3)
    topic = f"unclean-{uuid.uuid4().hex[:8]}"
    with zk_reader(zk_connect) as zk:
        s = _strand_stale_replica(cluster, zk, topic, {"unclean.leader.election.enable": "true"})
        _check_unclean_outcome(cluster, zk, topic, s)


def test_enabling_unclean_election_elects_an_offline_partitions_stale_replica(start_cluster: StartCluster,
                                                                             zk_connect: str) -> None:
    """Kafka's controller reacts to the topic config change itself (TopicUncleanLeaderElectionEnable):
    no broker needs to come or go for the offline partition to get its unclean leader."""
    cluster = start_cluster(3)
    topic = f"unclean-dyn-{uuid.uuid4().hex[:8]}"
    with zk_reader(zk_connect) as zk:
        s = _strand_stale_replica(cluster, zk, topic)
        _sync_with_controller(cluster, s.controller)
        assert metadata_view(s.controller, topic).leader == -1  # type: ignore[union-attr]

        admin = AdminClient({"bootstrap.servers": f"{s.controller.bootstrap},{s.b.bootstrap}"})
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        _check_unclean_outcome(cluster, zk, topic, s)
