"""Reassignment under load on real brokers: [0, 1, 2] -> [1, 2, 3] while an acks=all producer
keeps writing; nothing acknowledged is lost or reordered, the removed replica's log is deleted
and the new replica's log equals the others."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    StartCluster,
    agreed_state,
    controller_id,
    create_topic,
    partition_dir,
    read_partition,
    segments_identical,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
confluent_kafka = pytest.importorskip("confluent_kafka")

PAD = b"." * 200
PRELOADED = 20_000


def _value(number: int) -> bytes:
    return b"%08d" % number + PAD


class NumberedProducer(threading.Thread):
    """Writes 0, 1, 2, ... (acks=all, idempotent) until stopped; records every delivery report."""

    def __init__(self, bootstrap: str, topic: str, first: int, rate: float) -> None:
        super().__init__(daemon=True, name="numbered-producer")
        self.topic, self.next, self.rate = topic, first, rate
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000})
        self.acked: list[int] = []
        self.failed: dict[int, str] = {}
        self.stop_requested = threading.Event()
        self.unflushed = -1

    def _on_delivery(self, err: Any, msg: Any) -> None:
        number = int(msg.value()[:8])
        if err is None:
            self.acked.append(number)
        else:
            self.failed[number] = str(err)

    def run(self) -> None:
        start, sent = time.monotonic(), 0
        while not self.stop_requested.is_set():
            self.producer.produce(self.topic, _value(self.next), partition=0, on_delivery=self._on_delivery)
            self.next += 1
            sent += 1
            self.producer.poll(0)
            ahead = sent / self.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        self.unflushed = self.producer.flush(120)


def _controller(cluster: Any) -> BrokerProcess:
    return cluster.brokers[controller_id(cluster)]


def _in_progress(controller: BrokerProcess) -> list[tuple[str, int]]:
    listed = controller.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                                ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None))
    assert listed.error_code == 0, listed
    return [(t.name, p.partition_index) for t in listed.topics for p in t.partitions]


def test_reassignment_to_a_new_broker_under_acks_all_load(start_cluster: StartCluster, zk_connect: str) -> None:
    cluster = start_cluster(4)
    topic = f"moving-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [0, 1, 2])
    preload = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for number in range(PRELOADED):
        preload.produce(topic, _value(number), partition=0)
        preload.poll(0)
    assert preload.flush(60) == 0

    producer = NumberedProducer(cluster.bootstrap, topic, PRELOADED, rate=1000)
    producer.start()
    try:
        with zk_reader(zk_connect) as zk:
            wait_for(lambda: len(producer.acked) > 200, "the producer's first acknowledgements")
            controller = _controller(cluster)
            response = controller.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
                timeout_ms=15000, topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
                    AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=[1, 2, 3])])]))
            assert response.error_code == 0
            assert [p.error_code for t in response.responses for p in t.partitions] == [0]

            wait_for(lambda: not _in_progress(controller), "ListPartitionReassignments to be empty", timeout=90)
            assert zk.assignment(topic) == [1, 2, 3]
            done = wait_for(lambda: (v := agreed_state(cluster, zk, topic)) is not None and v.replicas == (1, 2, 3)
                            and v, "replicas [1, 2, 3] in every broker's metadata")
            assert done.leader in (1, 2, 3)
            wait_for_isr(cluster, zk, topic, [1, 2, 3])
            acked_at_completion = len(producer.acked)
            wait_for(lambda: len(producer.acked) > acked_at_completion + 200, "writes to the new replica set")
    finally:
        producer.stop_requested.set()
        producer.join(150)
    assert not producer.is_alive() and producer.unflushed == 0, "the producer did not drain"
    assert not producer.failed, f"deliveries failed: {dict(list(producer.failed.items())[:5])}"

    read = [int(v[:8]) for v in read_partition(cluster.bootstrap, topic, timeout=120)]
    assert read == list(range(producer.next)), "messages lost, duplicated or reordered"
    assert set(producer.acked) <= set(read)

    removed = cluster.brokers[0]
    wait_for(lambda: not partition_dir(removed, topic).exists(), "broker 0 to delete its replica")
    new_replicas = cluster.brokers[1:]
    wait_for(lambda: segments_identical(new_replicas, topic), "identical segments on brokers 1, 2 and 3")
