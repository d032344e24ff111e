"""Online migration (group.consumer.migration.policy=bidirectional): a classic group whose members roll
to group.protocol=consumer one by one becomes a consumer group without stopping, and back; offsets
carry over both ways; classic and consumer members share the group meanwhile (librdkafka both sides)."""
from __future__ import annotations

from typing import Any

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import produce, unique

PARTITIONS = 4


def _consumer(broker: BrokerProcess, group: str, protocol: str) -> Any:
    from confluent_kafka import Consumer

    settings = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": protocol,
                "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200}
    if protocol == "classic":
        settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "partition.assignment.strategy": "cooperative-sticky"})
    return Consumer(settings)


class Members:
    """Consumers of one group and every value they have read."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str) -> None:
        self.broker, self.group, self.topic = broker, group, topic
        self.consumers: list[Any] = []
        self.seen: set[bytes] = set()

    def add(self, protocol: str) -> None:
        consumer = _consumer(self.broker, self.group, protocol)
        consumer.subscribe([self.topic])
        self.consumers.append(consumer)

    def replace(self, index: int, protocol: str) -> None:
        self.consumers.pop(index).close()
        self.add(protocol)

    def poll(self) -> None:
        for consumer in self.consumers:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                self.seen.add(message.value())

    def covered(self) -> bool:
        self.poll()
        parts = [tp.partition for c in self.consumers for tp in c.assignment()]
        return sorted(parts) == list(range(PARTITIONS))

    def read_all(self, expected: set[bytes], what: str) -> None:
        wait_for(lambda: self.poll() or (self.seen >= expected and self.covered()), what, 90)

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()


def _group_type(broker: BrokerProcess, group: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=10)
    return next((g.type for g in listed.valid if g.group_id == group), None)


@pytest.mark.timeout(600)
def test_a_classic_group_rolls_to_the_consumer_protocol_and_back(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupType

    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    members = Members(broker, group, topic)
    expected: set[bytes] = set()
    try:
        for _ in range(2):
            members.add("classic")
        expected |= set(produce(broker.bootstrap, topic, PARTITIONS, 5, prefix="a"))
        members.read_all(expected, "the classic group reading everything")
        assert _group_type(broker, group) == ConsumerGroupType.CLASSIC
        for step, i in enumerate((0, 0)):  # the oldest member is replaced each time
            members.replace(i, "consumer")
            expected |= set(produce(broker.bootstrap, topic, PARTITIONS, 5, prefix=f"up{step}"))
            members.read_all(expected, f"reading on after upgrade step {step}")
            assert _group_type(broker, group) == ConsumerGroupType.CONSUMER
        for step, i in enumerate((0, 0)):
            members.replace(i, "classic")
            expected |= set(produce(broker.bootstrap, topic, PARTITIONS, 5, prefix=f"down{step}"))
            members.read_all(expected, f"reading on after downgrade step {step}")
        assert _group_type(broker, group) == ConsumerGroupType.CLASSIC
    finally:
        members.close()
    # Offsets carried over: a new member of the group starts where the others stopped.
    late = Members(broker, group, topic)
    try:
        late.add("classic")
        fresh = set(produce(broker.bootstrap, topic, PARTITIONS, 2, prefix="late"))
        late.read_all(fresh, "the records produced after the migration")
        assert late.seen == fresh
    finally:
        late.close()
