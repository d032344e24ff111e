"""Transactional producers of confluent-kafka, kafka-python and aiokafka end to end on a real broker
(transaction coordinator, KIP-890 verification, markers, TxnOffsetCommit): commit, abort of flushed
and of unflushed data, send_offsets_to_transaction, read_committed / read_uncommitted consumers of
each library seeing exactly what they should, and zombie fencing (a second producer with the same
transactional id fences the first: PRODUCER_FENCED, and the zombie's writes never become visible).
A transaction left open by a killed producer is in test_exactly_once_cluster.py."""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import OffsetFetchRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 2
# Each producer writes: a committed transaction, an aborted flushed one, an aborted unflushed one, and a
# committed one that also commits the offsets of a consume-transform-produce group.
COMMITTED = [b"commit-0", b"commit-1", b"commit-2", b"commit-3"]
ABORTED = [b"abort-0", b"abort-1"]  # flushed before the abort: on disk, skipped by read_committed
CONSUMED_OFFSETS = {0: 17, 1: 4}  # what the transaction commits for the input partitions


BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _names(broker: BrokerProcess, library: str) -> tuple[str, str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, source = f"out-{library}-{suffix}", f"in-{library}-{suffix}"
    broker.create_topic(topic, PARTITIONS)
    broker.create_topic(source, PARTITIONS)
    return topic, source, f"ctp-{library}-{suffix}"


# --- producers -------------------------------------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, source: str, group: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, COMMITTED[0], partition=0)
    producer.produce(topic, COMMITTED[1], partition=1)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i, value in enumerate(ABORTED):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"unflushed", partition=0)
    producer.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})  # only for its group metadata
    producer.begin_transaction()
    producer.produce(topic, COMMITTED[2], partition=0)
    producer.produce(topic, COMMITTED[3], partition=1)
    producer.send_offsets_to_transaction([TopicPartition(source, p, o) for p, o in CONSUMED_OFFSETS.items()],
                                         consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    consumer.close()


def produce_kafka_python(bootstrap: str, topic: str, source: str, group: str) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{group}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, COMMITTED[0], partition=0)
        producer.send(topic, COMMITTED[1], partition=1)
        producer.commit_transaction()
        producer.begin_transaction()
        for i, value in enumerate(ABORTED):
            producer.send(topic, value, partition=i % PARTITIONS)
        producer.flush(30)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"unflushed", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, COMMITTED[2], partition=0)
        producer.send(topic, COMMITTED[3], partition=1)
        producer.send_offsets_to_transaction(
            {TopicPartition(source, p): OffsetAndMetadata(o, "", -1) for p, o in CONSUMED_OFFSETS.items()}, group)
        producer.commit_transaction()
    finally:
        producer.close(30)


def produce_aiokafka(bootstrap: str, topic: str, source: str, group: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{group}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, COMMITTED[0], partition=0)
                await producer.send_and_wait(topic, COMMITTED[1], partition=1)
            await producer.begin_transaction()
            for i, value in enumerate(ABORTED):
                await producer.send_and_wait(topic, value, partition=i % PARTITIONS)
            await producer.abort_transaction()
            await producer.begin_transaction()
            await producer.send(topic, b"unflushed", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, COMMITTED[2], partition=0)
                await producer.send(topic, COMMITTED[3], partition=1)
                await producer.send_offsets_to_transaction(
                    {TopicPartition(source, p): o for p, o in CONSUMED_OFFSETS.items()}, group)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 90))


# --- consumers: every value up to the end of each partition ----------------------------------------

def consume_confluent(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values, at_end, deadline = [], set(), time.monotonic() + 30
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                at_end.add(message.partition())  # _PARTITION_EOF; anything else fails the comparison below
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return sorted(values)


def consume_kafka_python(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    ends = consumer.end_offsets(partitions)  # the LSO under read_committed
    values = []
    try:
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
    finally:
        consumer.close()
    return sorted(values)


def consume_aiokafka(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        values = []
        try:
            ends = await consumer.end_offsets(partitions)
            while any([await consumer.position(tp) < ends[tp] for tp in partitions]):
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values += [r.value for r in records]
        finally:
            await consumer.stop()
        return sorted(values)

    return asyncio.run(asyncio.wait_for(run(), 60))


PRODUCERS: dict[str, Callable[[str, str, str, str], None]] = {
    "confluent": produce_confluent, "kafka_python": produce_kafka_python, "aiokafka": produce_aiokafka}
CONSUMERS: dict[str, Callable[[str, str, str], list[bytes]]] = {
    "confluent": consume_confluent, "kafka_python": consume_kafka_python, "aiokafka": consume_aiokafka}


def _group_offsets(broker: BrokerProcess, group: str, source: str) -> dict[int, int]:
    request = OffsetFetchRequest(group_id=group, require_stable=True, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=source, partition_indexes=list(range(PARTITIONS)))])
    answer = broker.request(ApiKey.OFFSET_FETCH, 7, request)
    return {p.partition_index: p.committed_offset for p in answer.topics[0].partitions if p.error_code == 0}


@pytest.mark.parametrize("library", sorted(PRODUCERS))
def test_transactional_producer_commits_aborts_and_commits_offsets(broker: BrokerProcess, library: str) -> None:
    topic, source, group = _names(broker, library)
    PRODUCERS[library](broker.bootstrap, topic, source, group)
    assert wait_for(lambda: _group_offsets(broker, group, source) == CONSUMED_OFFSETS,
                    "the offsets committed in the transaction", 30)
    for reader in sorted(CONSUMERS):
        assert CONSUMERS[reader](broker.bootstrap, topic, "read_committed") == sorted(COMMITTED), reader
        # The unflushed record may or may not have left the producer before its abort.
        uncommitted = CONSUMERS[reader](broker.bootstrap, topic, "read_uncommitted")
        assert uncommitted in (sorted(COMMITTED + ABORTED), sorted(COMMITTED + ABORTED + [b"unflushed"])), reader


# --- zombie fencing: (open a transaction and flush a write, then try to commit it) -----------------

def zombie_confluent(bootstrap: str, topic: str, txn: str) -> tuple[Callable[[], None], Callable[[], str]]:
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"zombie", partition=0)
    producer.flush(30)

    def commit() -> str:
        try:
            producer.commit_transaction(30)
        except KafkaException as exc:
            error = exc.args[0]
            assert error.fatal(), error
            return error.name()  # librdkafka's fatal error names the broker's error
        return "committed"

    return lambda: None, commit


def zombie_kafka_python(bootstrap: str, topic: str, txn: str) -> tuple[Callable[[], None], Callable[[], str]]:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"zombie", partition=0)
    producer.flush(30)

    def commit() -> str:
        try:
            producer.commit_transaction()
        except KafkaError as exc:
            return type(exc).__name__
        return "committed"

    return lambda: producer.close(10), commit


def zombie_aiokafka(bootstrap: str, topic: str, txn: str) -> tuple[Callable[[], None], Callable[[], str]]:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    loop = asyncio.new_event_loop()
    producer: AIOKafkaProducer | None = None

    async def start() -> None:
        nonlocal producer
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn)
        await producer.start()
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"zombie", partition=0)

    async def commit_async() -> str:
        assert producer is not None
        try:
            await producer.commit_transaction()
        except KafkaError as exc:
            return type(exc).__name__
        return "committed"

    def close() -> None:
        if producer is not None:
            loop.run_until_complete(asyncio.wait_for(producer.stop(), 30))
        loop.close()

    loop.run_until_complete(asyncio.wait_for(start(), 60))
    return close, lambda: loop.run_until_complete(asyncio.wait_for(commit_async(), 60))


ZOMBIES: dict[str, tuple[Callable[[str, str, str], tuple[Callable[[], None], Callable[[], str]]], set[str]]] = {
    # What each library reports for a commit after the broker answered PRODUCER_FENCED.
    "confluent": (zombie_confluent, {"PRODUCER_FENCED", "_FENCED"}),
    "kafka_python": (zombie_kafka_python, {"ProducerFencedError"}),
    "aiokafka": (zombie_aiokafka, {"ProducerFenced"}),
}


@pytest.mark.parametrize("library", sorted(ZOMBIES))
def test_a_zombie_is_fenced_and_its_writes_never_become_visible(broker: BrokerProcess, library: str) -> None:
    from confluent_kafka import Producer

    from tests.integration.transactions.txn_helpers import describe

    topic, _source, group = _names(broker, f"zombie-{library}")
    txn = f"tx-{group}"
    start, fenced_errors = ZOMBIES[library]
    close_zombie, commit_zombie = start(broker.bootstrap, topic, txn)
    try:
        successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn})
        successor.init_transactions(30)  # aborts the zombie's open transaction under a bumped epoch
        assert commit_zombie() in fenced_errors
        successor.begin_transaction()
        successor.produce(topic, b"successor", partition=0)
        successor.produce(topic, b"successor", partition=1)
        successor.commit_transaction(30)
    finally:
        close_zombie()
    state = wait_for(lambda: (s := describe(broker, txn)).transaction_state == "CompleteCommit" and s,
                     "the successor's commit to complete")
    assert state.producer_epoch == 2  # the zombie's 0, the fence's 1 (its abort), the successor's 2
    for reader in sorted(CONSUMERS):
        assert CONSUMERS[reader](broker.bootstrap, topic, "read_committed") == [b"successor"] * 2, reader
    # The zombie's write is in the log, aborted: only read_uncommitted shows it.
    assert consume_confluent(broker.bootstrap, topic, "read_uncommitted") == [b"successor"] * 2 + [b"zombie"]


def test_writes_outside_the_transaction_are_refused_as_kafka_3_9_does(broker: BrokerProcess) -> None:
    """KIP-890 with the real coordinator, raw: a partition (or a group's offsets partition) not added to
    the transaction is refused with INVALID_TXN_STATE, or TRANSACTION_ABORTABLE for the versions that
    know it (Produce v11, TxnOffsetCommit v4) -- the codes a Kafka 3.9 broker answered side by side."""
    from protocol.errors import Errors
    from protocol.messages import ProduceRequest, TxnOffsetCommitRequest
    from protocol.records.builder import RecordBatchBuilder
    from tests.integration.transactions.txn_helpers import add_offsets, add_partitions, begin, wait_for_coordinator

    from tests.integration.groups.group_helpers import wait_for_coordinator as wait_for_group_coordinator

    topic, _, group = _names(broker, "raw")
    transactional_id = f"tx-{group}"
    wait_for_coordinator(broker, transactional_id)
    wait_for_group_coordinator(broker, group)
    pid, epoch = begin(broker, transactional_id)

    def produce(version: int) -> int:
        builder = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True)
        builder.append(int(time.time() * 1000), None, b"v")
        request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=builder.build())])])
        return broker.request(ApiKey.PRODUCE, version, request).responses[0].partition_responses[0].error_code

    def commit_offsets(version: int) -> int:
        request = TxnOffsetCommitRequest(
            transactional_id=transactional_id, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None, topics=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])])
        return broker.request(ApiKey.TXN_OFFSET_COMMIT, version, request, timeout=15.0).topics[0].partitions[0].error_code

    assert [produce(v) for v in (9, 10, 11)] == [Errors.INVALID_TXN_STATE] * 2 + [Errors.TRANSACTION_ABORTABLE]
    assert [commit_offsets(v) for v in (3, 4)] == [Errors.INVALID_TXN_STATE, Errors.TRANSACTION_ABORTABLE]
    assert add_partitions(broker, transactional_id, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}
    assert add_offsets(broker, transactional_id, pid, epoch, group) is Errors.NONE
    assert (produce(9), commit_offsets(3)) == (Errors.NONE, Errors.NONE)
