"""Share consumers (confluent-kafka's ShareConsumer) against a real broker."""

from __future__ import annotations

import time
from typing import Any

from tests.harness.broker import BrokerProcess

WARM = b"warm-up"


def share_consumer(broker: BrokerProcess, group: str, **overrides: Any) -> Any:
    from confluent_kafka import ShareConsumer

    return ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **overrides})


def producer(broker: BrokerProcess) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})


def produce(broker: BrokerProcess, topic: str, values: list[bytes], partition: int = 0) -> None:
    sink = producer(broker)
    for value in values:
        sink.produce(topic, value, partition=partition)
    assert sink.flush(30) == 0


def records(consumer: Any, timeout: float = 0.5) -> list[Any]:
    """One poll's records; every one is a record, not an error."""
    polled = consumer.poll(timeout).records()
    for message in polled:
        assert message.error() is None, message.error()
    return list(polled)


def warm_up(broker: BrokerProcess, topic: str, consumer: Any, partitions: int = 1, timeout: float = 60,
            others: tuple[Any, ...] = ()) -> None:
    """Wait until the group's share-partitions exist: with share.auto.offset.reset=latest (the
    default) they start at the end of the log when first fetched, so a record produced before then
    is never delivered. A warm-up record that arrives (at ``consumer`` or one of ``others``, the
    group's other members) shows the partition is being read; warm-up records are accepted
    (implicitly or here) and must be ignored by the test."""
    sink = producer(broker)
    reached: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(reached) < partitions:
        assert time.monotonic() < deadline, f"no warm-up record reached the consumer of {topic} in {timeout}s"
        for p in set(range(partitions)) - reached:
            sink.produce(topic, WARM, partition=p)
        sink.flush(10)
        for member in (consumer, *others):
            for message in records(member, 0.5 if not others else 0.2):
                reached.add(message.partition())
                _accept(member, message)


def drain(consumers: list[Any], want: int, timeout: float = 60, ignore: bytes = WARM) -> dict[int, list[Any]]:
    """Poll every consumer until ``want`` records (warm-ups aside) arrived; by consumer index."""
    got: dict[int, list[Any]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while sum(len(v) for v in got.values()) < want:
        assert time.monotonic() < deadline, f"only {sum(len(v) for v in got.values())} of {want} records arrived"
        for i, consumer in enumerate(consumers):
            for message in records(consumer, 0.2):
                if message.value() != ignore:
                    got[i].append(message)
                else:
                    _accept(consumer, message)
    return got


def _accept(consumer: Any, message: Any) -> None:
    """Accept a record in explicit mode (implicit mode accepts it with the next poll)."""
    from confluent_kafka import AcknowledgeType

    try:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    except Exception:  # implicit mode
        pass

# __share_group_state on a one-broker cluster (Kafka's default replication factor is 3)
STATE_TOPIC = {"share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
               "share.coordinator.state.topic.num.partitions": "3"}
