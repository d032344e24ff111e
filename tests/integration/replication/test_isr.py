"""ISR shrink and expand on real brokers: a follower that stops fetching leaves the ISR, one that
catches up rejoins, and ZooKeeper and every broker's Metadata agree on the ISR at each step."""
from __future__ import annotations

import uuid

import pytest

from protocol.errors import Errors
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    StartCluster,
    create_topic,
    read_partition,
    produce_raw,
    segments_identical,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
pytest.importorskip("confluent_kafka")

LAG_MS = 2000
# A paused broker sends no ZooKeeper heartbeats: the session must outlive the pause, which lasts
# about replica.lag.time.max.ms plus one ISR check (half of it) plus the AlterPartition round trip.
PAUSE_OVERRIDES = {"replica.lag.time.max.ms": str(LAG_MS), "zookeeper.session.timeout.ms": "20000"}


def test_paused_follower_is_shrunk_by_the_leader_and_rejoins_after_sigcont(
        start_cluster: StartCluster, zk_connect: str) -> None:
    cluster = start_cluster(3, PAUSE_OVERRIDES)
    topic = f"isr-pause-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [1, 2, 0])
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    with zk_reader(zk_connect) as zk:
        start = wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert start.leader == 1
        assert produce_raw(leader, topic, [b"before-0", b"before-1"], acks=-1).error_code == 0

        follower.pause()
        try:
            # An acks=all write the paused follower never fetches waits for the ISR to shrink,
            # and is acknowledged once it has: the leader's AlterPartition took the follower out.
            waiting = produce_raw(leader, topic, [b"waiting"], acks=-1, timeout_ms=15000)
            assert (waiting.error_code, waiting.base_offset) == (Errors.NONE, 2)
            # Only the leader noticed the silence: no leader election (same leader, same epoch).
            shrunk = wait_for_isr(cluster, zk, topic, [0, 1], timeout=15)
            assert (shrunk.leader, shrunk.leader_epoch) == (1, start.leader_epoch)
            during = [b"during-%d" % i for i in range(20)]
            assert produce_raw(leader, topic, during, acks=-1).error_code == Errors.NONE  # ISR {0, 1} has them
        finally:
            follower.resume()

        rejoined = wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert (rejoined.leader, rejoined.leader_epoch) == (1, start.leader_epoch)
    leader_log = leader.log_path.read_text(errors="replace")
    # The leader proposed both changes itself (AlterPartition); the controller only recorded them.
    assert f"Shrinking ISR of {topic}-0 from " in leader_log
    assert f"Proposing ISR [1, 0, 2] (was [1, 0]) for {topic}-0" in leader_log
    wait_for(lambda: segments_identical(cluster.brokers, topic), "identical segments on the three replicas")
    assert read_partition(cluster.bootstrap, topic) == [b"before-0", b"before-1", b"waiting", *during]


def test_stopped_follower_leaves_the_isr_and_rejoins_after_restart(
        start_cluster: StartCluster, zk_connect: str) -> None:
    cluster = start_cluster(3, {"replica.lag.time.max.ms": str(LAG_MS)})
    topic = f"isr-stop-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [1, 2, 0])
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    with zk_reader(zk_connect) as zk:
        wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert produce_raw(leader, topic, [b"before"], acks=-1).error_code == 0

        assert follower.stop() == 0
        shrunk = wait_for_isr(cluster, zk, topic, [0, 1])
        assert shrunk.leader == 1 and shrunk.replicas == (1, 2, 0)
        while_down = [b"while-down-%d" % i for i in range(50)]
        response = produce_raw(leader, topic, while_down, acks=-1)
        assert response.error_code == Errors.NONE

        follower.start()
        rejoined = wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert rejoined.leader == 1
    wait_for(lambda: segments_identical(cluster.brokers, topic), "identical segments on the three replicas")
    assert read_partition(follower.bootstrap, topic) == [b"before", *while_down]
