"""confluent-kafka's ShareConsumer (KIP-932) against the broker: acknowledgement modes, release,
reject, redelivery after a lock runs out, the delivery limit and several consumers on one partition."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import unique
from tests.integration.share.share_helpers import STATE_TOPIC, drain, produce, records, share_consumer, warm_up

LOCK_MS = 3000
BROKER_OVERRIDES = {"offsets.topic.num.partitions": "1", **STATE_TOPIC, "group.share.record.lock.duration.ms": str(LOCK_MS),
                    "group.share.delivery.count.limit": "3"}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    topic = unique("share")
    broker.create_topic(topic, partitions)
    return topic


def _values(messages: list[Any]) -> list[bytes]:
    return [m.value() for m in messages]


def test_implicit_acknowledgement_delivers_every_record_once(broker: BrokerProcess) -> None:
    topic, group = _topic(broker), unique("g")
    consumer = share_consumer(broker, group)
    consumer.subscribe([topic])
    try:
        warm_up(broker, topic, consumer)
        expected = [f"m{i}".encode() for i in range(20)]
        produce(broker, topic, expected)
        got = drain([consumer], len(expected))[0]
        assert sorted(_values(got)) == sorted(expected)
        assert {m.delivery_count() for m in got} == {1}
        consumer.commit_sync(30)  # the last poll's records are accepted now
    finally:
        consumer.close()
    # Accepted records are never delivered again, to this group's next member either.
    successor = share_consumer(broker, group)
    successor.subscribe([topic])
    try:
        produce(broker, topic, [b"after"])
        assert _values(drain([successor], 1)[0]) == [b"after"]
    finally:
        successor.close()


def test_explicit_release_redelivers_and_reject_archives(broker: BrokerProcess) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = _topic(broker), unique("g")
    consumer = share_consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        warm_up(broker, topic, consumer)
        produce(broker, topic, [b"release-me", b"reject-me", b"accept-me"])
        first = drain([consumer], 3)[0]
        for message in first:
            kind = {b"release-me": AcknowledgeType.RELEASE, b"reject-me": AcknowledgeType.REJECT}.get(
                message.value(), AcknowledgeType.ACCEPT)
            consumer.acknowledge(message, kind)
        consumer.commit_sync(30)
        again = drain([consumer], 1)[0]
        assert _values(again) == [b"release-me"] and again[0].delivery_count() == 2
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        consumer.commit_async()
        produce(broker, topic, [b"last"])
        last = drain([consumer], 1)[0]
        assert _values(last) == [b"last"]  # nothing rejected or accepted comes back
        consumer.acknowledge_offset(topic, 0, last[0].offset())
    finally:
        consumer.close()


def test_the_delivery_limit_archives_a_record_released_again_and_again(broker: BrokerProcess) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = _topic(broker), unique("g")
    consumer = share_consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        warm_up(broker, topic, consumer)
        produce(broker, topic, [b"poison"])
        counts = []
        for _ in range(3):  # group.share.delivery.count.limit
            message = drain([consumer], 1)[0][0]
            counts.append(message.delivery_count())
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
            consumer.commit_sync(30)
        assert counts == [1, 2, 3]
        produce(broker, topic, [b"next"])
        following = drain([consumer], 1)[0]
        assert _values(following) == [b"next"]
        consumer.acknowledge(following[0])
    finally:
        consumer.close()


def test_several_consumers_on_one_partition_each_get_distinct_records(broker: BrokerProcess) -> None:
    topic, group = _topic(broker), unique("g")
    consumers = [share_consumer(broker, group) for _ in range(3)]
    for consumer in consumers:
        consumer.subscribe([topic])
    try:
        warm_up(broker, topic, consumers[0])
        expected = [f"w{i}".encode() for i in range(90)]
        for start in range(0, len(expected), 10):  # batches of 10, so every consumer can get some
            produce(broker, topic, expected[start:start + 10])
        got = drain(consumers, len(expected))
        values = [v for messages in got.values() for v in _values(messages)]
        assert sorted(values) == sorted(expected)  # each record to exactly one of them
    finally:
        for consumer in consumers:
            consumer.close()


_HOLDER = textwrap.dedent("""
    import sys
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([sys.argv[3]])
    while True:
        got = [m.offset() for m in consumer.poll(0.5).records() if m.error() is None]
        if got:
            print(" ".join(map(str, got)), flush=True)
            break
    sys.stdin.read()  # hold the acquired records, unacknowledged, until killed
""")


def test_records_of_a_killed_consumer_are_redelivered_once_its_locks_expire(broker: BrokerProcess) -> None:
    topic, group = _topic(broker), unique("g")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, broker.bootstrap, group, topic],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        assert holder.stdout is not None
        while not select.select([holder.stdout], [], [], 0.5)[0]:  # until the holder got something
            assert holder.poll() is None and time.monotonic() < deadline, "the holding consumer got nothing"
            produce(broker, topic, [b"held"])
        held = {int(offset) for offset in holder.stdout.readline().split()}
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        survivor = share_consumer(broker, group)
        survivor.subscribe([topic])
        try:
            redelivered: dict[int, int] = {}
            wait_until = time.monotonic() + LOCK_MS / 1000 + 60
            while not held <= set(redelivered):
                assert time.monotonic() < wait_until, f"held offsets {held} not redelivered: {redelivered}"
                redelivered.update({m.offset(): m.delivery_count() for m in records(survivor, 0.2)})
            assert {redelivered[offset] for offset in held} == {2}
        finally:
            survivor.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def _alter_group_configs(broker: BrokerProcess, group: str, values: dict[str, str]) -> None:
    from protocol.api_keys import ApiKey
    from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest as IAC

    altered = broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IAC(resources=[IAC.AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[
            IAC.AlterableConfig(name=name, config_operation=0, value=value) for name, value in values.items()])]))
    assert altered.responses[0].error_code == 0

    def applied() -> bool:
        described = broker.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                           configuration_keys=list(values))])).results[0]
        return {c.name: c.value for c in described.configs} == values

    wait_for(applied, "the group configs applied", 30)


def test_group_configs_earliest_and_read_committed(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic, group = _topic(broker), unique("g")
    transactional = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tx")})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for value in (b"committed-0", b"committed-1"):
        transactional.produce(topic, value, partition=0)
    transactional.commit_transaction(30)
    transactional.begin_transaction()
    for value in (b"aborted-0", b"aborted-1"):
        transactional.produce(topic, value, partition=0)
    transactional.flush(30)
    transactional.abort_transaction(30)
    produce(broker, topic, [b"plain"])
    _alter_group_configs(broker, group, {"share.auto.offset.reset": "earliest",
                                         "share.isolation.level": "read_committed"})
    consumer = share_consumer(broker, group)
    consumer.subscribe([topic])
    try:
        got = drain([consumer], 3)[0]  # produced before the group existed: earliest reaches them
        assert sorted(_values(got)) == [b"committed-0", b"committed-1", b"plain"]
        produce(broker, topic, [b"end"])
        assert _values(drain([consumer], 1)[0]) == [b"end"]  # the aborted records never come
    finally:
        consumer.close()


def test_a_share_group_and_a_consumer_group_read_the_same_topic_side_by_side(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    topic, share_group, consumer_group = _topic(broker), unique("share"), unique("consumer")
    sharing = share_consumer(broker, share_group)
    sharing.subscribe([topic])
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": consumer_group,
                        "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    try:
        warm_up(broker, topic, sharing)
        expected = [f"both{i}".encode() for i in range(10)]
        produce(broker, topic, expected)
        assert sorted(_values(drain([sharing], len(expected))[0])) == sorted(expected)
        seen: list[bytes] = []

        def consumed_all() -> bool:
            message = classic.poll(0.2)
            if message is not None and message.error() is None and message.value() != b"warm-up":
                seen.append(message.value())
            return sorted(seen) == sorted(expected)

        wait_for(consumed_all, "the consumer group reading every record too", 60)
    finally:
        classic.close()
        sharing.close()
