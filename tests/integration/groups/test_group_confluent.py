"""confluent-kafka (librdkafka) group consumers: assignors, manual and automatic commits, offset reset."""
from __future__ import annotations

from typing import Any

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import CONFLUENT_TIMEOUTS, produce, unique

PARTITIONS = 4


def _consumer(broker: BrokerProcess, group: str, **overrides: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **CONFLUENT_TIMEOUTS, **overrides})


def _poll_values(consumers: list[Any], seen: list[bytes]) -> None:
    for consumer in consumers:
        message = consumer.poll(0.1)
        if message is not None:
            assert message.error() is None, message.error()
            seen.append(message.value())


def _balanced(consumers: list[Any], seen: list[bytes]) -> list[set[int]] | None:
    _poll_values(consumers, seen)
    parts = [{tp.partition for tp in c.assignment()} for c in consumers]
    flat = [p for part in parts for p in part]
    return parts if all(parts) and len(flat) == len(set(flat)) == PARTITIONS else None


def _committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    reader = _consumer(broker, group)
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        reader.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_assignors_split_the_topic_and_manual_commits_stick(broker: BrokerProcess, strategy: str) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    consumers = [_consumer(broker, group, **{"partition.assignment.strategy": strategy}) for _ in range(2)]
    seen: list[bytes] = []
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        parts = wait_for(lambda: _balanced(consumers, seen), f"a balanced {strategy} assignment", 60)
        assert sorted(len(p) for p in parts) == [2, 2]
        expected = set(produce(broker.bootstrap, topic, PARTITIONS, 5))
        wait_for(lambda: _poll_values(consumers, seen) or set(seen) >= expected, "every message", 60)
        assert set(seen) == expected
        for consumer in consumers:
            committed = consumer.commit(asynchronous=False)
            assert committed and all(tp.error is None for tp in committed)
    finally:
        for consumer in consumers:
            consumer.close()
    assert _committed(broker, group, topic) == {p: 5 for p in range(PARTITIONS)}


def test_automatic_commits(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    expected = set(produce(broker.bootstrap, topic, PARTITIONS, 3))
    consumer = _consumer(broker, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 100})
    seen: list[bytes] = []
    try:
        consumer.subscribe([topic])
        wait_for(lambda: _poll_values([consumer], seen) or set(seen) >= expected, "every message", 60)
        wait_for(lambda: _poll_values([consumer], seen) or _committed(broker, group, topic) == {
            p: 3 for p in range(PARTITIONS)}, "the automatic commit of every partition", 30)
    finally:
        consumer.close()


def test_auto_offset_reset_earliest_and_latest(broker: BrokerProcess) -> None:
    topic = unique("t")
    broker.create_topic(topic, 1)
    old = produce(broker.bootstrap, topic, 1, 3, prefix="old")
    earliest = _consumer(broker, unique("g"), **{"auto.offset.reset": "earliest"})
    latest = _consumer(broker, unique("g"), **{"auto.offset.reset": "latest"})
    try:
        earliest.subscribe([topic])
        latest.subscribe([topic])
        from_earliest: list[bytes] = []
        wait_for(lambda: _poll_values([earliest], from_earliest) or len(from_earliest) >= 3, "old messages", 60)
        assert from_earliest == old

        # 'latest' starts at the end whenever its reset happens: keep producing until it sees something,
        # and it must never see the messages that were there before it joined.
        from_latest: list[bytes] = []
        sent: list[bytes] = []

        def got_new() -> bool:
            sent.extend(produce(broker.bootstrap, topic, 1, 1, prefix=f"new{len(sent)}"))
            for _ in range(5):
                _poll_values([latest], from_latest)
            return bool(from_latest)

        wait_for(got_new, "a new message for the 'latest' consumer", 60)
        assert not set(from_latest) & set(old)
        assert set(from_latest) <= set(sent)
    finally:
        earliest.close()
        latest.close()


def test_auto_offset_reset_none_fails_without_committed_offsets(broker: BrokerProcess) -> None:
    """librdkafka spells Java's auto.offset.reset=none as "error"."""
    from confluent_kafka import KafkaError

    topic = unique("t")
    broker.create_topic(topic, 1)
    produce(broker.bootstrap, topic, 1, 1)
    consumer = _consumer(broker, unique("g"), **{"auto.offset.reset": "error"})
    try:
        consumer.subscribe([topic])

        def reset_error() -> Any:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is not None, f"unexpected message {message.value()!r}"
                return message.error()
            return None

        error = wait_for(reset_error, "the offset reset error", 60)
        assert error.code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        consumer.close()
