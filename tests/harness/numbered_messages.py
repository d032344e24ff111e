"""Numbered messages through librdkafka, for tests that must prove nothing acknowledged is lost.

``NumberedProducer`` sends 0, 1, 2, ... (as key and value, number ``n`` to partition
``n % partitions``) from an idempotent acks=all producer, at a steady rate, until it has sent
``n`` messages or is stopped, and records where each acknowledged message landed.
``read_all`` reads every partition from its first offset to its end; ``check_exactly_once``
says what is wrong with what was read: every acknowledged message exactly once, at the offset
it was acknowledged at, each partition in the order sent, and no message twice.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import confluent_kafka


class NumberedProducer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, n: int | None = None,
                 **config: Any) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.n, self.rate = topic, partitions, n, rate
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": 300000, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000, **config,
        })
        self.acked: dict[int, tuple[int, int]] = {}  # number -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.sent = 0
        self._stopping = threading.Event()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        number = int(msg.key())
        if err is None:
            self.acked[number] = (msg.partition(), msg.offset())
        else:
            self.failed[number] = str(err)

    def run(self) -> None:
        start = time.monotonic()
        number = 0
        while (self.n is None or number < self.n) and not self._stopping.is_set():
            key = str(number).encode()
            while True:
                try:
                    self.producer.produce(self.topic, key=key, value=key, partition=number % self.partitions,
                                          on_delivery=self._on_delivery)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            number += 1
            self.sent = number
            self.producer.poll(0)
            ahead = number / self.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        self.producer.flush(300)

    def stop(self, timeout: float = 120.0) -> None:
        """Stop sending and wait until every message sent is acknowledged or failed."""
        self._stopping.set()
        self.finish(timeout)

    def finish(self, timeout: float = 120.0) -> None:
        """Wait until all ``n`` messages are sent and every one is acknowledged or failed."""
        self.join(timeout)
        if self.is_alive():
            pending = sorted(set(range(self.sent)) - self.acked.keys() - self.failed.keys())
            by_partition = {p: sum(1 for n in pending if n % self.partitions == p) for p in range(self.partitions)}
            raise AssertionError(f"the producer is still sending or waiting for deliveries after {timeout}s: "
                                 f"{len(pending)} of {self.sent} sent not answered (by partition: {by_partition}, "
                                 f"first: {pending[:5]})")

    def wait_for_progress(self, more: int, timeout: float = 60.0) -> None:
        """Wait until ``more`` messages beyond those acknowledged now are acknowledged."""
        target = len(self.acked) + more
        deadline = time.monotonic() + timeout
        while len(self.acked) < target:
            assert time.monotonic() < deadline, (f"only {len(self.acked)} of {target} messages acknowledged "
                                                 f"after {timeout}s (failed: {dict(list(self.failed.items())[:3])})")
            time.sleep(0.05)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0
             ) -> dict[int, list[tuple[int, int]]]:
    """Every partition read from offset 0 to its end: [(offset, number)]."""
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in ends])
        read: dict[int, list[tuple[int, int]]] = {p: [] for p in ends}
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
                if msg.offset() >= ends[msg.partition()]:
                    pending.discard(msg.partition())
                continue
            read[msg.partition()].append((msg.offset(), int(msg.value())))
            if msg.offset() + 1 >= ends[msg.partition()]:
                pending.discard(msg.partition())
        assert not pending, f"partitions {pending} not read to their end"
        return read
    finally:
        consumer.close()


def check_exactly_once(producer: NumberedProducer, read: dict[int, list[tuple[int, int]]],
                       all_acknowledged: bool = True) -> None:
    """Assert what was read holds every acknowledged message once, where it was acknowledged,
    in the order sent; with ``all_acknowledged`` also that nothing failed or is missing."""
    if all_acknowledged:
        assert not producer.failed, f"deliveries failed: {dict(list(producer.failed.items())[:5])}"
        assert len(producer.acked) == producer.sent, f"{producer.sent - len(producer.acked)} never acknowledged"
    numbers = [n for entries in read.values() for _, n in entries]
    assert len(numbers) == len(set(numbers)), "a message appears twice"
    for partition, entries in read.items():
        in_partition = [n for _, n in entries]
        assert in_partition == sorted(in_partition), f"partition {partition} is out of order"
        assert [o for o, _ in entries] == list(range(len(entries))), f"partition {partition} has offset gaps"
    for number, (partition, offset) in producer.acked.items():
        entries = read[partition]
        assert offset < len(entries) and entries[offset] == (offset, number), \
            f"acknowledged message {number} is not at {partition}/{offset}"
