"""KIP-848 consumer groups (group.protocol=consumer) with librdkafka (confluent-kafka 2.16): joining,
incremental rebalances, commits with member epochs, regex subscriptions and the admin client."""
from __future__ import annotations

from typing import Any

import pytest


from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import produce, unique

PARTITIONS = 6


def _consumer(broker: BrokerProcess, group: str, **overrides: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **overrides})


def _poll(consumers: list[Any], seen: dict[int, list[bytes]]) -> None:
    for i, consumer in enumerate(consumers):
        message = consumer.poll(0.1)
        if message is not None:
            assert message.error() is None, message.error()
            seen.setdefault(i, []).append(message.value())


def _assignments(consumers: list[Any], seen: dict[int, list[bytes]]) -> list[set[int]] | None:
    """Each consumer's partitions once they cover the topic with no partition twice."""
    _poll(consumers, seen)
    parts = [{tp.partition for tp in c.assignment()} for c in consumers]
    flat = [p for part in parts for p in part]
    return parts if all(parts) and len(flat) == len(set(flat)) == PARTITIONS else None


def test_members_share_the_topic_and_a_new_member_takes_only_its_share(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    expected = set(produce(broker.bootstrap, topic, PARTITIONS, 5))
    consumers = [_consumer(broker, group)]
    seen: dict[int, list[bytes]] = {}
    try:
        consumers[0].subscribe([topic])
        wait_for(lambda: _assignments(consumers, seen), "one member owning every partition", 60)
        consumers.append(_consumer(broker, group))
        consumers[1].subscribe([topic])
        parts = wait_for(lambda: _assignments(consumers, seen), "two members splitting the topic", 60)
        assert sorted(len(p) for p in parts) == [3, 3]
        wait_for(lambda: _poll(consumers, seen) or {v for vs in seen.values() for v in vs} >= expected,
                 "every record", 60)
        consumers[0].commit(asynchronous=False)
    finally:
        for consumer in consumers:
            consumer.close()


def test_commits_and_fetches_carry_member_epochs_and_survive_the_group(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicPartition

    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, 2)
    produce(broker.bootstrap, topic, 2, 3)
    consumer = _consumer(broker, group)
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is not None and len(consumer.assignment()) == 2, "an assignment", 60)
        consumer.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 3)], asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert [tp.offset for tp in committed] == [2, 3]
    finally:
        consumer.close()
    restarted = _consumer(broker, group)
    try:
        committed = restarted.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert [tp.offset for tp in committed] == [2, 3]
    finally:
        restarted.close()


def test_a_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess) -> None:
    prefix, group = unique("rx"), unique("g")
    broker.create_topic(f"{prefix}-a", 1)
    consumer = _consumer(broker, group, **{"topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        wait_for(lambda: consumer.poll(0.2) is None and {tp.topic for tp in consumer.assignment()} == {f"{prefix}-a"},
                 "the first topic assigned", 60)
        broker.create_topic(f"{prefix}-b", 1)
        wait_for(lambda: consumer.poll(0.2) is None
                 and {tp.topic for tp in consumer.assignment()} == {f"{prefix}-a", f"{prefix}-b"},
                 "the new topic assigned", 60)
    finally:
        consumer.close()


def test_the_admin_client_lists_describes_reads_offsets_and_deletes_consumer_groups(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, ConsumerGroupType, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, 2)
    consumer = _consumer(broker, group)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 2, "an assignment", 60)
        consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 0)], asynchronous=False)
        listed = admin.list_consumer_groups().result(timeout=10)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.type == ConsumerGroupType.CONSUMER
        assert str(described.state).endswith("STABLE")
        (member,) = described.members
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 4), (1, 0)]
        refused = admin.delete_consumer_groups([group])[group]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            refused.result(timeout=10)
    finally:
        consumer.close()
    wait_for(lambda: admin.delete_consumer_groups([group])[group].exception(timeout=10) is None,
             "the empty group deleted", 30)
    left = admin.list_consumer_groups().result(timeout=10)
    assert group not in [g.group_id for g in left.valid]


def test_a_static_member_restarts_and_gets_its_partitions_back(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, 4)
    revoked_from_b: list[int] = []
    a = _consumer(broker, group, **{"group.instance.id": "a"})
    b = _consumer(broker, group, **{"group.instance.id": "b"})
    seen: dict[int, list[bytes]] = {}
    try:
        a.subscribe([topic])
        b.subscribe([topic], on_revoke=lambda _, parts: revoked_from_b.extend(p.partition for p in parts))
        wait_for(lambda: _poll([a, b], seen) or (
            len(a.assignment()) == 2 and len(b.assignment()) == 2), "two static members with two partitions each", 60)
        before = {tp.partition for tp in a.assignment()}
        revoked_from_b.clear()  # what the first balancing took from b does not count
        a.close()
        a = _consumer(broker, group, **{"group.instance.id": "a"})
        a.subscribe([topic])
        wait_for(lambda: _poll([a, b], seen) or {tp.partition for tp in a.assignment()} == before,
                 "the same partitions back", 60)
        assert revoked_from_b == []  # the other member never gave anything up
    finally:
        a.close()
        b.close()
