"""Admin views of groups through kafka-python's KafkaAdminClient and confluent-kafka's AdminClient:
listing, describing, committed offsets and lag, offset deletion and group deletion."""
from __future__ import annotations

from typing import Any

from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import CONFLUENT_TIMEOUTS, describe_group, produce, unique

PARTITIONS = 2
COMMITTED = {0: 4, 1: 7}
PER_PARTITION = 10


def _member_with_commits(broker: BrokerProcess, topic: str, group: str) -> Any:
    """A subscribed confluent consumer (the group's only member) that committed COMMITTED."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "admin-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **CONFLUENT_TIMEOUTS})
    consumer.subscribe([topic])

    def assigned() -> bool:
        consumer.poll(0.1)
        return len(consumer.assignment()) == PARTITIONS and describe_group(broker, group).group_state == "Stable"

    wait_for(assigned, "the member's assignment", 60)
    result = consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
                             asynchronous=False)
    assert all(tp.error is None for tp in result)
    return consumer


def _deleted(admin: Any, groups: list[str]) -> dict[str, str]:
    """kafka-python's delete_groups answers each group with 'OK' or the error class's name."""
    return dict(admin.delete_groups(groups))


def _setup(broker: BrokerProcess) -> tuple[str, str]:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    produce(broker.bootstrap, topic, PARTITIONS, PER_PARTITION)
    return topic, group


def test_kafka_python_admin_client_views_and_deletes_groups(broker: BrokerProcess) -> None:
    from kafka import KafkaAdminClient

    topic, group = _setup(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        _kafka_python_checks(admin, broker, topic, group)
    finally:
        admin.close()


def _kafka_python_checks(admin: Any, broker: BrokerProcess, topic: str, group: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import NoError

    member = _member_with_commits(broker, topic, group)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}

        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable" and described["protocol_type"] == "consumer"
        (only,) = described["members"]
        assert only["client_id"] == "admin-test" and only["client_host"] == "/127.0.0.1"
        assigned = only["member_assignment"]["assigned_partitions"]
        assert {(t["topic"], p) for t in assigned for p in t["partitions"]} == {(topic, p) for p in range(PARTITIONS)}

        offsets = admin.list_group_offsets({group: None})[group]
        committed = {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
        assert committed == COMMITTED
        end = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        try:
            ends = end.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        finally:
            end.close()
        lag = {tp.partition: high - committed[tp.partition] for tp, high in ends.items()}
        assert lag == {p: PER_PARTITION - o for p, o in COMMITTED.items()}

        assert _deleted(admin, [group]) == {group: "NonEmptyGroupError"}
    finally:
        member.close()
    wait_for(lambda: describe_group(broker, group).group_state == "Empty", "the group to become empty", 30)
    deleted = admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
    assert deleted == {TopicPartition(topic, 0): NoError}
    left = admin.list_group_offsets({group: None})[group]
    assert {tp.partition for tp in left if tp.topic == topic} == {1}
    never = unique("never")
    assert _deleted(admin, [group, never]) == {group: "OK", never: "GroupIdNotFoundError"}
    assert group not in {g["group_id"] for g in admin.list_groups()}
    assert describe_group(broker, group).group_state == "Dead"


def test_confluent_admin_client_views_and_deletes_groups(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    topic, group = _setup(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    member = _member_with_commits(broker, topic, group)
    try:
        listing = admin.list_consumer_groups(request_timeout=15).result()
        assert not listing.errors
        (mine,) = [g for g in listing.valid if g.group_id == group]
        assert mine.state == ConsumerGroupState.STABLE and not mine.is_simple_consumer_group
        stable_only = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}, request_timeout=15).result()
        assert group not in {g.group_id for g in stable_only.valid}

        description = admin.describe_consumer_groups([group], request_timeout=15)[group].result()
        assert description.state == ConsumerGroupState.STABLE and description.partition_assignor == "range"
        (only,) = description.members
        assert only.client_id == "admin-test" and only.host == "/127.0.0.1"
        assert {(tp.topic, tp.partition) for tp in only.assignment.topic_partitions} == {
            (topic, p) for p in range(PARTITIONS)}
        assert description.coordinator.id == 0

        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                    request_timeout=15)[group].result()
        committed = {tp.partition: tp.offset for tp in offsets.topic_partitions if tp.topic == topic}
        assert committed == COMMITTED
        lag = {p: member.get_watermark_offsets(_tp(topic, p), timeout=10)[1] - o for p, o in committed.items()}
        assert lag == {p: PER_PARTITION - o for p, o in COMMITTED.items()}

        refused = admin.delete_consumer_groups([group], request_timeout=15)[group]
        try:
            refused.result()
            raise AssertionError("deleting a group with a member must fail")
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        member.close()
    wait_for(lambda: describe_group(broker, group).group_state == "Empty", "the group to become empty", 30)
    admin.delete_consumer_groups([group], request_timeout=15)[group].result()
    listing = admin.list_consumer_groups(request_timeout=15).result()
    assert group not in {g.group_id for g in listing.valid}


def _tp(topic: str, partition: int) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition)
