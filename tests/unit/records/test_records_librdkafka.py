"""Batches produced by librdkafka (confluent-kafka), decoded by ours.

librdkafka does not expose its record builder, but it ships an in-process mock
cluster (``test.mock.num.brokers``) that stores produced batches byte for byte.
The producer writes to it; a hand-written Fetch v4 over a localhost socket
reads the stored bytes back. No external broker or process is involved.
"""

from __future__ import annotations

import socket
import struct

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from protocol.records.compression import CompressionType  # noqa: E402
from protocol.records.conversion import recompress_batch  # noqa: E402
from protocol.records.log_entry import decode_entry_records, iter_log_entries, validate_log_entry  # noqa: E402

TOPIC = "records-test"


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise ConnectionError("mock broker closed the connection")
        out += chunk
    return bytes(out)


def _fetch_raw(host: str, port: int, topic: str, partition: int, until: int) -> bytes:
    """The records bytes of one partition from offset 0 until offset ``until`` is covered.

    The mock cluster answers a fetch with one stored message set, and the producer may have
    sent several (its linger can expire between produce() calls on a loaded machine). What
    follows the produced data (the mock's own transaction marker, written with a zero CRC)
    is not fetched.
    """
    raw, offset = b"", 0
    while offset < until:
        chunk, high_watermark = _fetch_once(host, port, topic, partition, offset)
        if not chunk:
            raise AssertionError(f"mock broker returned nothing at offset {offset} (high watermark {high_watermark})")
        raw += chunk
        for _pos, header in iter_log_entries(chunk):
            offset = header.next_offset
    return raw


def _fetch_once(host: str, port: int, topic: str, partition: int, offset: int) -> tuple[bytes, int]:
    """The records bytes and high watermark of a Fetch v4 (non-flexible) for one partition."""
    body = struct.pack(">iiiib", -1, 500, 1, 64 << 20, 0)
    body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 64 << 20)
    request = struct.pack(">hhi", 1, 4, 1) + _string("records-test") + body
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        response = _recv_exactly(sock, struct.unpack(">i", _recv_exactly(sock, 4))[0])
    pos = 4 + 4 + 4  # correlation id, throttle time, topic count
    pos += 2 + struct.unpack_from(">h", response, pos)[0] + 4  # topic name, partition count
    _partition, error, high_watermark, _lso = struct.unpack_from(">ihqq", response, pos)
    assert error == 0, f"mock broker fetch error {error}"
    pos += 22
    aborted = struct.unpack_from(">i", response, pos)[0]
    pos += 4 + max(aborted, 0) * 16
    size = struct.unpack_from(">i", response, pos)[0]
    return response[pos + 4 : pos + 4 + size], high_watermark


def _produce(config: dict, messages: list[dict], transactional: bool = False) -> bytes:
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, "linger.ms": 50, "log_level": 3, **config})
    errors: list = []
    if transactional:
        producer.init_transactions(10)
        producer.begin_transaction()
    for message in messages:
        producer.produce(TOPIC, partition=0, on_delivery=lambda err, _msg: errors.append(err), **message)
    if transactional:
        producer.commit_transaction(10)
    assert producer.flush(10) == 0
    assert errors == [None] * len(messages)
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    return _fetch_raw(broker.host, broker.port, TOPIC, 0, until=len(messages))


def _messages(count: int = 20) -> list[dict]:
    out = []
    for i in range(count):
        message = {"value": None if i == 7 else b"value %d " % i * 20, "timestamp": 1_700_000_000_000 + i}
        if i % 3:
            message["key"] = b"key-%d" % i
        if i % 4 == 0:
            message["headers"] = [("trace", b"t%d" % i), ("nothing", None)]
        out.append(message)
    return out


def _decode_all(raw: bytes) -> tuple[list, list]:
    headers, records = [], []
    end = 0
    for pos, header in iter_log_entries(raw):
        validate_log_entry(raw, pos)
        headers.append(header)
        records.extend(decode_entry_records(raw, pos))
        end = pos + header.size
    assert end == len(raw) and records
    return headers, records


def _check_records(records: list, messages: list[dict], magic: int = 2) -> None:
    assert [r.offset for r in records] == list(range(len(messages)))
    for record, message in zip(records, messages):
        assert record.key == message.get("key") and record.value == message["value"]
        assert record.timestamp == (message["timestamp"] if magic else -1)
        assert record.headers == message.get("headers", [])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_librdkafka_v2_batches_for_every_codec(codec: CompressionType) -> None:
    messages = _messages()
    raw = _produce({"compression.type": codec.name.lower()}, messages)
    headers, records = _decode_all(raw)
    # librdkafka sends a batch uncompressed when compressing does not make it smaller, as can happen
    # to a batch of a few records split off on a loaded machine (seen under xdist: {NONE, SNAPPY}).
    assert {h.magic for h in headers} == {2} and codec in {h.compression for h in headers} <= {codec, CompressionType.NONE}
    _check_records(records, messages)
    for target in CompressionType:  # and our recompression of librdkafka's bytes
        again = recompress_batch(raw, 0, target)
        assert decode_entry_records(again) == decode_entry_records(raw, 0)


@pytest.mark.timeout(60)
def test_librdkafka_idempotent_and_transactional_batches() -> None:
    messages = _messages(6)
    raw = _produce({"compression.type": "lz4", "transactional.id": "records-test-txn"}, messages, transactional=True)
    headers, records = _decode_all(raw)
    assert all(h.is_transactional and h.producer_id >= 0 and h.producer_epoch >= 0 for h in headers)
    assert headers[0].base_sequence == 0
    _check_records(records, messages)


@pytest.mark.timeout(60)
def test_librdkafka_magic0_message_set() -> None:
    """With ApiVersions disabled and a 0.9.0 fallback, librdkafka writes magic 0 messages."""
    messages = _messages(5)
    raw = _produce({"api.version.request": False, "broker.version.fallback": "0.9.0"}, messages)
    for message in messages:
        message.pop("headers", None)  # magic 0 has no headers; librdkafka drops them
    headers, records = _decode_all(raw)
    assert {h.magic for h in headers} == {0}
    _check_records(records, messages, magic=0)
