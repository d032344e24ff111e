"""Kafka's record-level produce checks (LogValidator), answered as a real Kafka 3.9 broker answers them.

Records a topic refuses are named one by one in the response (KIP-467 record errors) so that a
client fails exactly those messages: keyless records on compacted topics, timestamps outside
message.timestamp.before/after.max.ms (or the older difference.max.ms), LogAppendTime set by a
producer. Compressed batches whose inner offsets are not consecutive are renumbered when the
batch is recompressed anyway, and refused otherwise (UNKNOWN_SERVER_ERROR, as Kafka 3.9 does).
Records whose fields do not add up to their length are INVALID_RECORD whether their batch is
compressed or not (that test runs Kafka 3.9 next to us). Every expected answer, message texts
included, was taken from a real 3.9 broker.
"""
from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import FetchRequest, ProduceRequest
from protocol.records.batch import HEADER_STRUCT, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, update_crc
from protocol.records.compression import CompressionType, compress
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from protocol.records.record import encode_record, encode_varint
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.integration

NO_KEY = "Compacted topic cannot accept message without key in topic partition {}-0"
OUT_OF_RANGE = re.compile(r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
                          r"The timestamp should be within \[(-?\d+), (-?\d+)\]")


def _topic(broker: BrokerProcess, **configs: str) -> str:
    name = f"pv-{uuid.uuid4().hex[:10]}"
    broker.create_topic(name, configs={k.replace("_", "."): v for k, v in configs.items()})
    return name


def _batch(records: list[tuple[int, int, bytes | None]], codec: int = CompressionType.NONE, *,
           append_time: int | None = None) -> bytes:
    """A v2 batch from (offset delta, timestamp, key) triples, deltas as given (not necessarily 0..n-1)."""
    base = records[0][1]
    data = b"".join(encode_record(delta, ts - base, key, b"value") for delta, ts, key in records)
    if codec:
        data = compress(codec, data)
    attributes = codec | (TIMESTAMP_TYPE_MASK if append_time is not None else 0)
    max_timestamp = append_time if append_time is not None else max(ts for _, ts, _ in records)
    out = bytearray(RECORD_BATCH_OVERHEAD + len(data))
    HEADER_STRUCT.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, attributes, len(records) - 1, base, max_timestamp,
                            -1, -1, -1, len(records))
    out[RECORD_BATCH_OVERHEAD:] = data
    update_crc(out, 0)
    return bytes(out)


def _produce(broker: BrokerProcess, topic: str, batch: bytes, version: int = 9) -> Any:
    request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return broker.request(ApiKey.PRODUCE, version, request).responses[0].partition_responses[0]


def _fetched(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes | None]]:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    records = bytes(broker.request(ApiKey.FETCH, 12, request).responses[0].partitions[0].records or b"")
    return [(r.offset, r.key) for pos, _ in iter_log_entries(records) for r in decode_entry_records(records, pos)]


def _errors(entry: Any) -> list[tuple[int, str]]:
    return [(e.batch_index, e.batch_index_error_message) for e in entry.record_errors]


# --- compacted topics ------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_librdkafka_fails_exactly_the_keyless_messages_of_a_compacted_topic(module_broker: BrokerProcess,
                                                                           codec: str) -> None:
    topic = _topic(module_broker, cleanup_policy="compact")
    producer = Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 200,
                         "enable.idempotence": False, "compression.type": codec})
    # Versions and the partition's leader known before producing, so that the 100 messages meet in
    # one batch: under load, runs without this saw a batch with no keyless record accepted, and once
    # 20 messages refused as a whole (cause not pinned down; suspected: messages produced while the
    # client was still fetching metadata left in batches of their own).
    producer.list_topics(topic, timeout=30)
    outcome: dict[int, Any] = {}
    for i in range(100):
        producer.produce(topic, value=str(i).encode(), key=None if i % 10 == 9 else f"k{i}".encode(),
                         on_delivery=lambda err, msg: outcome.__setitem__(int(msg.value()), err))
    assert producer.flush(30) == 0
    invalid = sorted(i for i, err in outcome.items() if err is not None and err.code() == KafkaError.INVALID_RECORD)
    assert invalid == list(range(9, 100, 10))
    # The others were refused with the batch, which librdkafka reports as a different record's error.
    assert {err.code() for i, err in outcome.items() if i % 10 != 9} == {KafkaError._INVALID_DIFFERENT_RECORD}


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_every_keyless_record_is_named_in_the_record_errors(module_broker: BrokerProcess, codec: int) -> None:
    topic = _topic(module_broker, cleanup_policy="compact")
    now = int(time.time() * 1000)
    entry = _produce(module_broker, topic, _batch([(i, now, None if i % 10 == 9 else b"k") for i in range(30)],
                                                  codec))
    message = NO_KEY.format(topic)
    assert (entry.error_code, entry.base_offset, entry.log_start_offset) == (Errors.INVALID_RECORD, -1, 0)
    assert _errors(entry) == [(9, message), (19, message), (29, message)]
    listed = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in (9, 19, 29))
    assert entry.error_message == ("One or more records have been rejected due to 3 record errors in total, and only "
                                   f"showing the first three errors at most: [{listed}]")
    assert _fetched(module_broker, topic) == []
    before_v8 = _produce(module_broker, topic, _batch([(0, now, None)], codec), version=7)
    assert (before_v8.error_code, before_v8.record_errors) == (Errors.INVALID_RECORD, [])


# --- timestamps ----------------------------------------------------------------------------------------

def _out_of_range(entry: Any) -> dict[int, tuple[int, int, int]]:
    """index -> (timestamp, low, high) of each record error about a timestamp out of range."""
    out = {}
    for index, message in _errors(entry):
        match = OUT_OF_RANGE.fullmatch(message)
        assert match is not None, message
        assert int(match.group(2)) == index
        out[index] = (int(match.group(1)), int(match.group(3)), int(match.group(4)))
    return out


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_timestamps_outside_the_topic_bounds_are_invalid_timestamp_errors(module_broker: BrokerProcess,
                                                                         codec: int) -> None:
    topic = _topic(module_broker, **{"message.timestamp.before.max.ms": "3600000",
                                     "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    records = [(0, now, b"k"), (1, now - 7_200_000, b"k"), (2, now + 3_600_000, b"k"), (3, -1, b"k"), (4, now, b"k")]
    before = int(time.time() * 1000)
    entry = _produce(module_broker, topic, _batch(records, codec))
    after = int(time.time() * 1000)
    assert (entry.error_code, entry.error_message, entry.log_start_offset) == \
        (Errors.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", 0)
    found = _out_of_range(entry)
    assert sorted(found) == [1, 2]  # a record without a timestamp (-1) is not checked
    for index, (timestamp, low, high) in found.items():
        assert timestamp == records[index][1]
        assert before - 3_600_000 <= low <= after - 3_600_000 and high == low + 3_600_000 + 60_000
    assert _produce(module_broker, topic, _batch([(0, now, b"k")], codec)).error_code == 0


def test_the_older_difference_setting_bounds_both_sides_unless_one_is_set(module_broker: BrokerProcess) -> None:
    now = int(time.time() * 1000)
    records = [(0, now, b"k"), (1, now - 7_200_000, b"k"), (2, now + 3_600_000, b"k")]
    both = _topic(module_broker, **{"message.timestamp.difference.max.ms": "3600000"})
    assert sorted(_out_of_range(_produce(module_broker, both, _batch(records)))) == [1]  # +1h is still within
    future_ok = _topic(module_broker, **{"message.timestamp.difference.max.ms": "1000",
                                         "message.timestamp.after.max.ms": "10000000"})
    found = _out_of_range(_produce(module_broker, future_ok, _batch(records)))
    assert sorted(found) == [1]
    _, low, high = found[1]
    assert high - low == 1000 + 10_000_000
    unbounded_after = _topic(module_broker, **{"message.timestamp.before.max.ms": "1000"})
    _, low, high = _out_of_range(_produce(module_broker, unbounded_after, _batch(records)))[1]
    assert high < 0 < low  # now + Long.MAX_VALUE wraps around, as in Kafka's message


def test_a_confluent_producer_learns_which_timestamps_the_topic_refuses(module_broker: BrokerProcess) -> None:
    topic = _topic(module_broker, **{"message.timestamp.before.max.ms": "3600000"})
    producer = Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 0})
    outcome: dict[bytes, Any] = {}
    now = int(time.time() * 1000)
    for name, timestamp in ((b"old", now - 86_400_000), (b"fresh", now)):
        producer.produce(topic, key=name, value=b"v", timestamp=timestamp,
                         on_delivery=lambda err, msg: outcome.__setitem__(msg.key(), err))
        producer.flush(30)
    assert outcome[b"old"] is not None and outcome[b"old"].code() == KafkaError.INVALID_TIMESTAMP
    assert outcome[b"fresh"] is None


@pytest.mark.parametrize(("codec", "shown"), [(CompressionType.NONE, "DefaultRecord(offset={i}, timestamp={ts}, "
                                                                    "key={k} bytes, value=5 bytes)"),
                                              (CompressionType.LZ4, "PartialDefaultRecord(offset={i}, "
                                                                    "timestamp={ts}, key={pk} bytes, value=5 bytes)")])
def test_producers_may_not_set_log_append_time_where_the_broker_would_not_use_theirs(
        module_broker: BrokerProcess, codec: int, shown: str) -> None:
    now = int(time.time() * 1000)
    records = [(0, now, None), (1, now, b"k")]
    append_time_topic = _topic(module_broker, **{"message.timestamp.type": "LogAppendTime"})
    entry = _produce(module_broker, append_time_topic, _batch(records, codec, append_time=now))
    assert entry.error_code == Errors.INVALID_TIMESTAMP
    assert _errors(entry) == [
        (i, f"Invalid timestamp type in message {shown.format(i=i, ts=now, k=k, pk=pk)}. Producer should not set "
            f"timestamp type to LogAppendTime.") for i, k, pk in ((0, 0, -1), (1, 1, 1))]
    create_time_topic = _topic(module_broker)
    assert _produce(module_broker, create_time_topic, _batch(records, codec, append_time=-1)).error_code == \
        Errors.INVALID_TIMESTAMP
    assert _produce(module_broker, create_time_topic, _batch(records, codec, append_time=now)).error_code == 0


# --- inner offsets of compressed batches --------------------------------------------------------------

def test_inner_offsets_that_are_not_consecutive(module_broker: BrokerProcess) -> None:
    now = int(time.time() * 1000)
    gaps = [(0, now, b"a"), (0, now, b"b"), (0, now, b"c"), (3, now, b"d")]
    recompressed = _topic(module_broker, **{"compression.type": "gzip"})
    for codec in (CompressionType.LZ4, CompressionType.NONE):  # rebuilt anyway: renumbered
        assert _produce(module_broker, recompressed, _batch(gaps, codec)).error_code == 0
    assert _fetched(module_broker, recompressed) == [(i, key) for i, key in enumerate([b"a", b"b", b"c", b"d"] * 2)]
    in_place = _topic(module_broker)
    refused = _produce(module_broker, in_place, _batch(gaps, CompressionType.LZ4))
    assert (refused.error_code, refused.error_message, refused.log_start_offset) == \
        (Errors.UNKNOWN_SERVER_ERROR, None, 0)
    assert _produce(module_broker, in_place, _batch(gaps)).error_code == 0  # uncompressed: kept as sent
    assert _fetched(module_broker, in_place) == [(0, b"a"), (0, b"b"), (0, b"c"), (3, b"d")]


# --- malformed records -------------------------------------------------------------------------------

def _malformed(body: bytes, codec: int) -> bytes:
    """A CRC-valid batch of one record whose fields follow its length prefix as ``body`` gives them."""
    data = encode_varint(len(body)) + body
    return _batch_of(data if codec == CompressionType.NONE else compress(codec, data), codec)


def _batch_of(data: bytes, codec: int, count: int = 1) -> bytes:
    out = bytearray(RECORD_BATCH_OVERHEAD + len(data))
    now = int(time.time() * 1000)
    HEADER_STRUCT.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, codec, count - 1, now, now, -1, -1, -1, count)
    out[RECORD_BATCH_OVERHEAD:] = data
    update_crc(out, 0)
    return bytes(out)


FIELDS = b"\x00\x00\x00\x01"  # attributes, timestamp delta 0, offset delta 0, a null key
MALFORMED = {
    "a value past its record": FIELDS + encode_varint(6) + b"hello\x00",
    "a byte left after the headers": FIELDS + encode_varint(5) + b"hello\x00\x00",
    "a negative header count": FIELDS + encode_varint(5) + b"hello" + encode_varint(-2),
    "a header count with no header": FIELDS + encode_varint(5) + b"hello" + encode_varint(1),
}


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_records_whose_fields_do_not_add_up_are_invalid_records(zookeeper: ZooKeeperServer, tmp_path: Path,
                                                                kind: str) -> None:
    """A batch whose CRC is right but whose records are malformed (a client bug) is refused with
    INVALID_RECORD and the log start offset, compressed or not, and nothing of it is appended:
    Kafka 3.9's record iterator reads every record of every produced batch. Its consumers would
    otherwise fail on those offsets for good."""
    if kind == "kafka":
        kafka_broker_or_skip()
    broker = (BrokerProcess if kind == "ours" else KafkaJavaBroker)(
        zookeeper.connect_string_with_chroot(f"malformed-{kind}"), 0, tmp_path)
    broker.start()
    try:
        topic = _topic(broker)
        broker.wait_for_leaders(topic, 1)
        good = FIELDS + encode_varint(5) + b"hello\x00"
        sent = [(f"{name}, {codec_name}", _malformed(body, codec)) for codec_name, codec in
                (("uncompressed", CompressionType.NONE), ("lz4", CompressionType.LZ4)) for name, body in MALFORMED.items()]
        sent += [("a record length past an uncompressed batch", _batch_of(encode_varint(40) + good, 0)),
                 ("a record fewer than the batch says", _batch_of(encode_varint(len(good)) + good, 0, count=2)),
                 ("a record more than the batch says", _batch_of((encode_varint(len(good)) + good) * 2, 0))]
        # a count of billions over two records: refused from the data, nothing allocated by the count
        sent += [(f"two records said to be 2**31-1, {name}", _batch_of(
            data if codec == CompressionType.NONE else compress(codec, data), codec, count=2**31 - 1))
            for name, codec in (("uncompressed", CompressionType.NONE), ("lz4", CompressionType.LZ4))
            for data in [(encode_varint(len(good)) + good) * 2]]
        answers = {name: _produce(broker, topic, batch) for name, batch in sent}
        assert {name: (Errors(entry.error_code).name, entry.base_offset, entry.log_start_offset, entry.error_message,
                       _errors(entry)) for name, entry in answers.items()} == \
            {name: ("INVALID_RECORD", -1, 0, None, []) for name, _ in sent}
        assert _produce(broker, topic, _malformed(good, CompressionType.NONE)).base_offset == 0  # nothing appended
    finally:
        broker.stop()
