"""A real broker process served to real clients: kcat, kafka-python, confluent-kafka, aiokafka."""
from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest

from tests.harness.broker import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KCAT_TIMEOUT = 30


def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=KCAT_TIMEOUT)


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _wait_for_end_offset(broker: BrokerProcess, topic: str, offset: int, timeout: float = 20.0) -> None:
    from protocol.api_keys import ApiKey
    from protocol.messages import ListOffsetsRequest

    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    deadline = time.monotonic() + timeout
    while broker.request(ApiKey.LIST_OFFSETS, 7, request).topics[0].partitions[0].offset < offset:
        assert time.monotonic() < deadline, f"{topic} did not reach offset {offset}"
        time.sleep(0.05)


def test_kcat_metadata_lists_broker_and_topic(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic, partitions=3)
    result = _kcat("-b", broker.bootstrap, "-L")
    assert result.returncode == 0, result.stderr
    assert f"broker 0 at 127.0.0.1:{broker.port} (controller)" in result.stdout
    assert f'topic "{topic}" with 3 partitions:' in result.stdout
    for p in range(3):
        assert f"partition {p}, leader 0, replicas: 0, isrs: 0" in result.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_and_consume_keys_and_headers(broker: BrokerProcess, codec: str) -> None:
    topic = _topic()
    broker.create_topic(topic)
    lines = "".join(f"key{i}:value-{codec}-{i}\n" for i in range(20))
    produced = _kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec, "-K:",
                     "-H", "h1=v1", "-H", "h2=v2", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
                     "-f", "%o|%k|%s|%h\n")
    assert consumed.returncode == 0, consumed.stderr
    rows = consumed.stdout.splitlines()
    assert rows == [f"{i}|key{i}|value-{codec}-{i}|h1=v1,h2=v2" for i in range(20)]


def test_kcat_auto_creates_topic_on_produce(broker: BrokerProcess) -> None:
    topic = _topic()
    produced = _kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%s\n")
    assert consumed.stdout.splitlines() == ["a", "b"]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_producer_acks_and_codecs(broker: BrokerProcess, acks: int | str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _topic()
    broker.create_topic(topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, linger_ms=5)
    expected = []
    try:
        for codec in [None, "gzip", "snappy", "lz4", "zstd"]:
            codec_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, compression_type=codec)
            try:
                futures = [codec_producer.send(topic, key=f"k{i}".encode(), value=f"{codec}-{i}".encode(),
                                               headers=[("h", b"x")], partition=0) for i in range(10)]
                codec_producer.flush(20)
                for future in futures:
                    metadata = future.get(20)
                    assert metadata.topic == topic and metadata.partition == 0
                    if acks != 0:
                        assert metadata.offset >= 0
                expected += [f"{codec}-{i}" for i in range(10)]
            finally:
                codec_producer.close(10)
    finally:
        producer.close(10)
    if acks == 0:
        # Nothing confirms acks=0 writes: the last ones may still be in the broker's hands.
        _wait_for_end_offset(broker, topic, len(expected))
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=10000)
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 50}
        consumer.seek(tp, 0)
        values = []
        for message in consumer:
            values.append(message.value.decode())
            assert message.headers == [("h", b"x")]
            if len(values) == 50:
                break
        assert values == expected
    finally:
        consumer.close()


def test_kafka_python_seek_and_offsets_for_times(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _topic()
    broker.create_topic(topic)
    base = int(time.time() * 1000) - 100_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    try:
        for i in range(10):
            producer.send(topic, value=f"v{i}".encode(), partition=0, timestamp_ms=base + i * 1000).get(20)
    finally:
        producer.close(10)
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=10000)
    try:
        consumer.assign([tp])
        found = consumer.offsets_for_times({tp: base + 4500})[tp]
        assert (found.offset, found.timestamp) == (5, base + 5000)
        assert consumer.offsets_for_times({tp: base + 10_000_000})[tp] is None
        consumer.seek(tp, 7)
        values = []
        for message in consumer:
            values.append((message.offset, message.value))
            if len(values) == 3:
                break
        assert values == [(7, b"v7"), (8, b"v8"), (9, b"v9")]
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_idempotent_producer_and_consumer(broker: BrokerProcess, codec: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = _topic()
    broker.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                         "compression.type": codec, "linger.ms": 5})
    errors: list[object] = []
    for i in range(200):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert errors == []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        got: dict[int, list[str]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 200 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got[message.partition()].append(message.value().decode())
        assert got[0] == [f"v{i}" for i in range(0, 200, 2)]
        assert got[1] == [f"v{i}" for i in range(1, 200, 2)]
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 100)
    finally:
        consumer.close()


def test_aiokafka_producer_and_consumer(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _topic()
    broker.create_topic(topic)

    async def run() -> list[tuple[int, bytes, bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip")
        await producer.start()
        try:
            for i in range(30):
                await producer.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 10)
            out = []
            while len(out) < 20:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for messages in batch.values():
                    out += [(m.offset, m.key, m.value) for m in messages]
            return out
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(10, 30)]
