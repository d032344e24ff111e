"""min.insync.replicas on real brokers: with the ISR below it, acks=all is refused before the
append (NOT_ENOUGH_REPLICAS), acks=1 is still accepted, and nothing acknowledged is lost once
the followers return."""
from __future__ import annotations

import uuid

import pytest

from protocol.errors import Errors
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    Deliveries,
    StartCluster,
    controller_id,
    create_topic,
    produce_raw,
    read_partition,
    segments_identical,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
confluent_kafka = pytest.importorskip("confluent_kafka")


def test_acks_all_needs_min_insync_replicas_and_acks_1_does_not(start_cluster: StartCluster,
                                                                  zk_connect: str) -> None:
    cluster = start_cluster(3)
    topic = f"min-isr-{uuid.uuid4().hex[:8]}"
    # The controller leads, so stopping both followers never moves the controller.
    leader = cluster.brokers[controller_id(cluster)]
    followers = [b for b in cluster.brokers if b is not leader]
    create_topic(cluster, topic, [leader.broker_id, *(f.broker_id for f in followers)],
                 {"min.insync.replicas": "2"})
    with zk_reader(zk_connect) as zk:
        wait_for_isr(cluster, zk, topic, [0, 1, 2])
        first = Deliveries(leader.bootstrap, "all")
        first.send(topic, [b"all-before-%d" % i for i in range(10)])
        assert not first.errors

        for follower in followers:
            assert follower.stop() == 0
        wait_for_isr(cluster, zk, topic, [leader.broker_id])

        refused = produce_raw(leader, topic, [b"refused-raw"], acks=-1)
        assert refused.error_code == Errors.NOT_ENOUGH_REPLICAS
        assert refused.base_offset == -1
        client_refused = Deliveries(leader.bootstrap, "all")
        client_refused.send(topic, [b"refused-client"])
        assert not client_refused.acked
        assert [e.code() for e in client_refused.errors.values()] == [confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS]

        accepted_raw = produce_raw(leader, topic, [b"one-raw"], acks=1)
        assert accepted_raw.error_code == Errors.NONE
        acks_one = Deliveries(leader.bootstrap, "1")
        acks_one.send(topic, [b"one-%d" % i for i in range(20)])
        assert not acks_one.errors

        for follower in followers:
            follower.start()
        wait_for_isr(cluster, zk, topic, [0, 1, 2])
        last = Deliveries(cluster.bootstrap, "all")
        last.send(topic, [b"all-after-%d" % i for i in range(10)])
        assert not last.errors

    expected = first.acked + [b"one-raw"] + acks_one.acked + last.acked
    assert len(expected) == 41
    assert read_partition(cluster.bootstrap, topic) == expected
    wait_for(lambda: segments_identical(cluster.brokers, topic), "identical segments on the three replicas")


def test_acks_all_write_waiting_when_the_isr_shrinks_below_min_isr(start_cluster: StartCluster,
                                                                  zk_connect: str) -> None:
    """The write was appended while the ISR was large enough, then the ISR shrank below
    min.insync.replicas: Kafka answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (the data stays)."""
    # The paused broker must keep its ZooKeeper session for the lag period and an ISR check.
    cluster = start_cluster(3, {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "20000"})
    leader = cluster.brokers[controller_id(cluster)]
    follower = next(b for b in cluster.brokers if b is not leader)
    topic = f"after-append-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [leader.broker_id, follower.broker_id], {"min.insync.replicas": "2"})
    with zk_reader(zk_connect) as zk:
        wait_for_isr(cluster, zk, topic, [leader.broker_id, follower.broker_id])
        assert produce_raw(leader, topic, [b"replicated"], acks=-1).error_code == Errors.NONE
        follower.pause()
        try:
            waiting = produce_raw(leader, topic, [b"appended"], acks=-1, timeout_ms=15000)
            assert waiting.error_code == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            wait_for_isr(cluster, zk, topic, [leader.broker_id], timeout=15)
            assert produce_raw(leader, topic, [b"refused"], acks=-1).error_code == Errors.NOT_ENOUGH_REPLICAS
        finally:
            follower.resume()
        wait_for_isr(cluster, zk, topic, [leader.broker_id, follower.broker_id])
        assert produce_raw(leader, topic, [b"accepted"], acks=-1).error_code == Errors.NONE
    assert read_partition(cluster.bootstrap, topic) == [b"replicated", b"appended", b"accepted"]
