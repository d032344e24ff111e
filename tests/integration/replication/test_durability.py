"""The durability test: acks=all writes survive the leader's broker being killed, over and over.

Three brokers, an RF=3 topic with min.insync.replicas=2. An idempotent librdkafka producer
sends 100,000 numbered messages with acks=all while the broker leading partition 0 is killed
with SIGKILL and restarted, round after round. Afterwards every partition is read from the
beginning: every acknowledged message is there exactly once, in the order it was sent, and
no message at all appears twice.
"""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")

MESSAGES = 100_000
PARTITIONS = 2
KILL_ROUNDS = 4


def _partition_state(broker: BrokerProcess, topic: str, partition: int) -> Any:
    topics = broker.metadata([topic]).topics
    if not topics or topics[0].error_code:
        return None
    return next((p for p in topics[0].partitions if p.partition_index == partition), None)



class NumberedProducer(threading.Thread):
    """Sends 0..n-1 as key and value at a steady pace; records what was acknowledged where."""

    def __init__(self, bootstrap: str, topic: str, n: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.topic, self.n, self.rate = topic, n, rate
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": 300000, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
        })
        self.acked: dict[int, tuple[int, int]] = {}  # number -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.sent = 0

    def _on_delivery(self, err: Any, msg: Any) -> None:
        number = int(msg.key())
        if err is None:
            self.acked[number] = (msg.partition(), msg.offset())
        else:
            self.failed[number] = str(err)

    def run(self) -> None:
        start = time.monotonic()
        for number in range(self.n):
            key = str(number).encode()
            while True:
                try:
                    self.producer.produce(self.topic, key=key, value=key, partition=number % PARTITIONS,
                                          on_delivery=self._on_delivery)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.sent = number + 1
            self.producer.poll(0)
            ahead = (number + 1) / self.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        self.producer.flush(300)


def _consume_all(bootstrap: str, topic: str, end_offsets: dict[int, int]) -> dict[int, list[tuple[int, int]]]:
    """Every partition read from offset 0 to its end: [(offset, number)]."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in end_offsets])
        read: dict[int, list[tuple[int, int]]] = {p: [] for p in end_offsets}
        pending = {p for p, end in end_offsets.items() if end > 0}
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
                if msg.offset() >= end_offsets[msg.partition()]:
                    pending.discard(msg.partition())
                continue
            read[msg.partition()].append((msg.offset(), int(msg.value())))
            if msg.offset() + 1 >= end_offsets[msg.partition()]:
                pending.discard(msg.partition())
        assert not pending, f"partitions {pending} not read to their end"
        return read
    finally:
        consumer.close()


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_acknowledged_writes_survive_repeated_leader_kills(zk_connect: str, tmp_path: Path) -> None:
    cluster = BrokerCluster(3, zk_connect, tmp_path)
    try:
        cluster.start()
        topic = f"durable-{uuid.uuid4().hex[:8]}"
        brokers = {b.broker_id: b for b in cluster.brokers}
        cluster.brokers[0].create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                        configs={"min.insync.replicas": "2"})
        producer = NumberedProducer(cluster.bootstrap, topic, MESSAGES, rate=2500)
        producer.start()
        for round_number in range(KILL_ROUNDS):
            wait_for(lambda: producer.sent > (round_number + 1) * MESSAGES // (KILL_ROUNDS + 2), "producer progress")
            observer = next(b for b in cluster.brokers if b.process is not None)
            state = wait_for(lambda: _partition_state(observer, topic, 0), "partition 0 metadata")
            victim = brokers[state.leader_id]
            victim.kill()
            others = [b for b in cluster.brokers if b is not victim]
            wait_for(lambda: (s := _partition_state(others[0], topic, 0)) is not None
                  and s.leader_id not in (-1, victim.broker_id), f"a new leader after killing {victim}")
            victim.wait_until_deregistered()
            victim.start()
            wait_for(lambda: all(len(p.isr_nodes) == 3 for p in others[0].metadata([topic]).topics[0].partitions),
                  f"{victim} back in every ISR")
        producer.join(600)
        assert not producer.is_alive(), "the producer did not finish"
        assert not producer.failed, f"deliveries failed: {dict(list(producer.failed.items())[:5])}"
        assert len(producer.acked) == MESSAGES

        read = _consume_all(cluster.bootstrap, topic, _end_offsets(cluster.bootstrap, topic))
        numbers = [n for part in read.values() for _, n in part]
        assert len(numbers) == len(set(numbers)), "a message appears twice"
        for partition, entries in read.items():
            sent_here = [n for n in range(MESSAGES) if n % PARTITIONS == partition]
            assert [n for _, n in entries] == sent_here, f"partition {partition} lost or reordered messages"
            assert [o for o, _ in entries] == list(range(len(entries))), f"partition {partition} has offset gaps"
        for number, (partition, offset) in producer.acked.items():
            assert read[partition][offset] == (offset, number)
    finally:
        cluster.kill()
