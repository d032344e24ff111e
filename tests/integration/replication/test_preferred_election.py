"""Preferred leader election after a restart, on real brokers: the preferred leader stops,
leadership moves, it comes back as a follower and rejoins the ISR, and ElectLeaders(PREFERRED)
through librdkafka's AdminClient gives it leadership back; clients keep working throughout."""
from __future__ import annotations

import uuid

import pytest

from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    Deliveries,
    StartCluster,
    controller_id,
    create_topic,
    metadata_view,
    read_partition,
    segments_identical,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ElectionType, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402


def test_preferred_leader_election_after_the_preferred_leader_returns(start_cluster: StartCluster,
                                                                      zk_connect: str) -> None:
    cluster = start_cluster(3)
    controller = cluster.brokers[controller_id(cluster)]
    preferred, second = (b for b in cluster.brokers if b is not controller)
    topic = f"preferred-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [preferred.broker_id, second.broker_id, controller.broker_id])
    everything: list[bytes] = []
    with zk_reader(zk_connect) as zk:
        first = wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert first.leader == preferred.broker_id
        producer = Deliveries(cluster.bootstrap, "all", retries=5)
        producer.send(topic, [b"first-%d" % i for i in range(10)])

        assert preferred.stop() == 0
        moved = wait_for_isr(cluster, zk, topic, [second.broker_id, controller.broker_id])
        assert moved.leader == second.broker_id  # the next replica in assignment order
        producer.send(topic, [b"moved-%d" % i for i in range(10)])

        preferred.start()
        back = wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert back.leader == second.broker_id  # returning does not take leadership back by itself
        producer.send(topic, [b"back-%d" % i for i in range(10)])

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futures = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
        results = futures.result(30)
        assert {(tp.topic, tp.partition): err for tp, err in results.items()} == {(topic, 0): None}
        elected = wait_for_isr(cluster, zk, topic, [0, 1, 2])
        assert elected.leader == preferred.broker_id
        assert elected.leader_epoch > back.leader_epoch
        for broker in cluster.brokers:
            assert metadata_view(broker, topic).leader == preferred.broker_id  # type: ignore[union-attr]

        again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
        (error,) = again.values()
        assert error is not None and error.code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED, error

        producer.send(topic, [b"elected-%d" % i for i in range(10)])
        assert not producer.errors, producer.errors
        everything = producer.acked
    assert len(everything) == 40
    assert read_partition(cluster.bootstrap, topic) == everything
    wait_for(lambda: segments_identical(cluster.brokers, topic), "identical segments on the three replicas")
