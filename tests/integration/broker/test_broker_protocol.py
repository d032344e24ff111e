"""Request-level behaviour of a real broker process, checked with the project's own codecs."""
from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    ApiVersionsResponse,
    DescribeProducersRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    UpdateMetadataRequest,
)
from protocol.records.batch import read_batch_header, update_crc
from protocol.records.builder import RecordBatchBuilder
from protocol.records.compression import CompressionType
from protocol.records.legacy import build_message_set
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from tests.harness.broker import BrokerProcess
from tests.harness.ports import free_port
from tests.harness.prometheus import scrape, value
from tests.harness.waiting import wait_for


def _topic() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


# An hour ago: within retention, which (as in Kafka) first runs log.initial.task.delay.ms after start.
RECENT = int(time.time() * 1000) - 3_600_000


def _batch(values: list[bytes], codec: int = CompressionType.NONE, timestamp: int = RECENT,
           **kwargs: Any) -> bytearray:
    builder = RecordBatchBuilder(magic=2, compression=codec, **kwargs)
    for i, value in enumerate(values):
        builder.append(timestamp + i, b"key", value)
    return builder.build()


def _produce(broker: BrokerProcess, topic: str, records: Any, partition: int = 0, acks: int = -1,
             version: int = 9) -> Any:
    request = ProduceRequest(acks=acks, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    return broker.request(ApiKey.PRODUCE, version, request).responses[0].partition_responses[0]


def _fetch_request(topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0, session_id: int = 0,
                   session_epoch: int = -1, partition_max_bytes: int = 1 << 20, **kwargs: Any) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 << 20,
                        isolation_level=0, session_id=session_id, session_epoch=session_epoch,
                        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])],
                        forgotten_topics_data=[], **kwargs)


def _values(records: Any) -> list[tuple[int, bytes | None]]:
    buf = bytes(records or b"")
    return [(r.offset, r.value) for pos, _ in iter_log_entries(buf) for r in decode_entry_records(buf, pos)]


def _raw_exchange(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        return sock.recv(size, socket.MSG_WAITALL)


# --- ApiVersions / Metadata --------------------------------------------------------------------

def test_api_versions_unknown_version_answers_v0_with_unsupported_version(broker: BrokerProcess) -> None:
    header = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00"
    body = b"\x00\x00\x00"  # client software name/version (compact strings) + no tags
    frame = _raw_exchange(broker.port, struct.pack(">i", len(header) + len(body)) + header + body)
    correlation_id = struct.unpack(">i", frame[:4])[0]
    response = ApiVersionsResponse.decode(frame[4:], 0)
    assert correlation_id == 7
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


def test_api_versions_lists_only_registered_handlers(broker: BrokerProcess) -> None:
    from broker.handlers import load_all
    from protocol.messages import ApiVersionsRequest

    handlers = load_all()
    response = broker.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t",
                                                                         client_software_version="1"))
    listed = {k.api_key for k in response.api_keys}
    assert listed <= {int(k) for k in handlers}
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
                ApiKey.INIT_PRODUCER_ID, ApiKey.OFFSET_FOR_LEADER_EPOCH):
        assert key in listed
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.PRODUCE] == (0, 11) and ranges[ApiKey.FETCH] == (0, 17)


@pytest.mark.parametrize("version", range(13))
def test_metadata_every_version(broker: BrokerProcess, version: int) -> None:
    topic = _topic()
    broker.create_topic(topic, 2)
    topics = [MetadataRequest.MetadataRequestTopic(name=topic)]
    request = MetadataRequest(topics=topics)
    if version >= 4:
        request.allow_auto_topic_creation = False
    response = broker.request(ApiKey.METADATA, version, request)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", broker.port)]
    [found] = response.topics
    assert (found.error_code, found.name) == (0, topic)
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in found.partitions] == \
        [(0, 0, [0], [0]), (1, 0, [0], [0])]
    if version >= 1:
        assert response.controller_id == 0
    if version >= 2:
        assert response.cluster_id
    if version >= 10:
        assert found.topic_id != uuid.UUID(int=0)


def test_metadata_unknown_invalid_and_auto_created_topics(broker: BrokerProcess) -> None:
    def metadata(name: str, auto: bool) -> Any:
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                  allow_auto_topic_creation=auto)
        return broker.request(ApiKey.METADATA, 12, request).topics[0]

    assert metadata("no-such-topic", False).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata("bad name!", True).error_code == Errors.INVALID_TOPIC_EXCEPTION
    name = _topic()
    assert metadata(name, True).error_code == Errors.LEADER_NOT_AVAILABLE
    broker.wait_for_leaders(name, 1)


# --- Produce -----------------------------------------------------------------------------------

def test_produce_errors(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic, configs={"max.message.bytes": "2000"})
    assert _produce(broker, "missing-topic", _batch([b"x"])).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _produce(broker, topic, _batch([b"x"]), partition=5).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    corrupt = _batch([b"hello"])
    corrupt[-1] ^= 0xFF
    assert _produce(broker, topic, corrupt).error_code == Errors.CORRUPT_MESSAGE
    assert _produce(broker, topic, _batch([b"x" * 5000])).error_code == Errors.MESSAGE_TOO_LARGE
    bad_count = _batch([b"a", b"b"])
    struct.pack_into(">i", bad_count, 23, 5)  # lastOffsetDelta 5 for 2 records
    update_crc(bad_count, 0)
    entry = _produce(broker, topic, bad_count)
    assert entry.error_code == Errors.INVALID_RECORD and entry.record_errors == []
    assert (entry.error_message, entry.log_start_offset) == (None, 0)  # as Kafka answers a batch it refuses
    two_batches = _batch([b"a"]) + _batch([b"b"])
    assert _produce(broker, topic, two_batches).error_code == Errors.INVALID_RECORD
    acks2 = ProduceRequest(acks=2, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=_batch([b"x"]))])])
    response = broker.request(ApiKey.PRODUCE, 9, acks2)
    assert response.responses[0].partition_responses[0].error_code == Errors.INVALID_REQUIRED_ACKS
    ok = _produce(broker, topic, _batch([b"fine"]))
    assert (ok.error_code, ok.base_offset, ok.log_start_offset) == (0, 0, 0)


def test_compacted_topic_needs_keys(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic, configs={"cleanup.policy": "compact"})
    builder = RecordBatchBuilder(magic=2, compression=CompressionType.LZ4)
    builder.append(1, b"k", b"keyed")
    builder.append(2, None, b"no key")
    entry = _produce(broker, topic, builder.build())
    assert entry.error_code == Errors.INVALID_RECORD
    assert [e.batch_index for e in entry.record_errors] == [1]
    assert _produce(broker, topic, _batch([b"v"])).error_code == 0


def test_produce_min_insync_replicas(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic, configs={"min.insync.replicas": "2"})
    assert _produce(broker, topic, _batch([b"x"]), acks=-1).error_code == Errors.NOT_ENOUGH_REPLICAS
    assert _produce(broker, topic, _batch([b"x"]), acks=1).error_code == 0


def test_topic_compression_type_and_log_append_time(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic, configs={"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    entry = _produce(broker, topic, _batch([b"a", b"b", b"c"], CompressionType.SNAPPY))
    assert entry.error_code == 0 and entry.log_append_time_ms >= before
    fetched = broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 0)).responses[0].partitions[0]
    header = read_batch_header(bytes(fetched.records), 0)
    assert header.compression == CompressionType.GZIP
    assert header.timestamp_type == 1 and header.max_timestamp == entry.log_append_time_ms
    assert _values(fetched.records) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_produce_v2_legacy_message_set_is_up_converted(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic)
    legacy = build_message_set(1, CompressionType.NONE, 0, [(0, 1000, b"k", b"old0"), (1, 1001, None, b"old1")])
    assert _produce(broker, topic, legacy, version=2, acks=1).error_code == 0
    fetched = broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 0)).responses[0].partitions[0]
    assert read_batch_header(bytes(fetched.records), 0).magic == 2
    assert _values(fetched.records) == [(0, b"old0"), (1, b"old1")]
    old = broker.request(ApiKey.FETCH, 1, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])).responses[0].partitions[0]
    assert old.error_code == 0 and bytes(old.records)[16] == 0  # magic 0 for Fetch v1
    assert _values(old.records) == [(0, b"old0"), (1, b"old1")]


def test_idempotent_produce_duplicates_and_sequence_errors(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic)
    init = broker.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id=None,
                                                                            transaction_timeout_ms=60000))
    assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
    pid = init.producer_id

    def batch(seq: int, values: list[bytes], epoch: int = 0) -> bytearray:
        return _batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    first = _produce(broker, topic, batch(0, [b"a", b"b"]))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert _produce(broker, topic, batch(2, [b"c"])).base_offset == 2
    duplicate = _produce(broker, topic, batch(0, [b"a", b"b"]))
    assert (duplicate.error_code, duplicate.base_offset) == (0, 0)
    assert _produce(broker, topic, batch(7, [b"z"])).error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    described = broker.request(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]))
    [state] = described.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, 0, 2)
    txn = broker.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id="tx",
                                                                           transaction_timeout_ms=60000))
    assert txn.error_code == Errors.NOT_COORDINATOR  # no __transaction_state yet: Kafka's answer too


def test_acks_zero_failure_closes_the_connection(broker: BrokerProcess) -> None:
    from protocol.framing import encode_request

    request = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="missing", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=_batch([b"x"]))])])
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(request, ApiKey.PRODUCE, 9, 1, "t"))
        assert sock.recv(1) == b""


# --- Fetch -------------------------------------------------------------------------------------

def test_fetch_offsets_limits_and_errors(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic)
    for i in range(3):
        _produce(broker, topic, _batch([b"v%d" % i] * 100))
    small = _fetch_request(topic, 0, partition_max_bytes=10)
    part = broker.request(ApiKey.FETCH, 12, small).responses[0].partitions[0]
    assert part.error_code == 0 and (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (300, 300, 0)
    assert len(_values(part.records)) == 100  # the first batch comes whole even above the limit
    middle = broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 150)).responses[0].partitions[0]
    assert _values(middle.records)[0][0] == 100  # whole batches: the one holding 150 starts at 100
    beyond = broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 301)).responses[0].partitions[0]
    assert beyond.error_code == Errors.OFFSET_OUT_OF_RANGE
    at_end = broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 300)).responses[0].partitions[0]
    assert at_end.error_code == 0 and _values(at_end.records) == []


def test_fetch_by_topic_id(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic)
    _produce(broker, topic, _batch([b"x"]))
    topic_id = broker.metadata([topic]).topics[0].topic_id
    request = _fetch_request(topic, 0)
    request.topics[0].topic_id = topic_id
    [found] = broker.request(ApiKey.FETCH, 13, request).responses
    assert found.topic_id == topic_id and _values(found.partitions[0].records) == [(0, b"x")]
    request.topics[0].topic_id = uuid.uuid4()
    [missing] = broker.request(ApiKey.FETCH, 13, request).responses
    assert missing.partitions[0].error_code == Errors.UNKNOWN_TOPIC_ID


def test_fetch_sessions(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic, 2)
    _produce(broker, topic, _batch([b"a"]), partition=0)
    full = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=0, session_epoch=0,
                        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                            FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                            for p in (0, 1)])], forgotten_topics_data=[])
    response = broker.request(ApiKey.FETCH, 12, full)
    session_id = response.session_id
    assert session_id != 0
    assert sorted(p.partition_index for p in response.responses[0].partitions) == [0, 1]
    # The client moves partition 0 past what it got; nothing else changed, so nothing comes back.
    empty = broker.request(ApiKey.FETCH, 12, _incremental(session_id, 1, topic, [0], fetch_offset=1))
    assert empty.error_code == 0 and empty.responses == []
    _produce(broker, topic, _batch([b"b"]), partition=1)
    changed = broker.request(ApiKey.FETCH, 12, _incremental(session_id, 2, topic, []))
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in changed.responses] == [(topic, [1])]
    assert _values(changed.responses[0].partitions[0].records) == [(0, b"b")]
    stale = broker.request(ApiKey.FETCH, 12, _incremental(session_id, 2, topic, []))
    assert stale.error_code == Errors.INVALID_FETCH_SESSION_EPOCH
    unknown = broker.request(ApiKey.FETCH, 12, _incremental(session_id + 1, 1, topic, []))
    assert unknown.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND
    closed = broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 0, session_id=session_id, session_epoch=-1))
    assert closed.session_id == 0
    after_close = broker.request(ApiKey.FETCH, 12, _incremental(session_id, 3, topic, []))
    assert after_close.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND


def _incremental(session_id: int, epoch: int, topic: str, partitions: list[int], fetch_offset: int = 0
                 ) -> FetchRequest:
    topics = [FetchRequest.FetchTopic(topic=topic, partitions=[
        FetchRequest.FetchPartition(partition=p, fetch_offset=fetch_offset, partition_max_bytes=1 << 20)
        for p in partitions])] if partitions else []
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=session_id,
                        session_epoch=epoch, topics=topics, forgotten_topics_data=[])


def test_long_poll_fetch_is_woken_by_an_append(zk_connect: str, tmp_path: Path) -> None:
    metrics_port = free_port()
    with BrokerProcess(zk_connect, 0, tmp_path, {"metrics.prometheus.listener": f"http://127.0.0.1:{metrics_port}"}
                       ) as broker:
        topic = _topic()
        broker.create_topic(topic)
        results: list[Any] = []
        poller = threading.Thread(target=lambda: results.append(
            broker.request(ApiKey.FETCH, 12, _fetch_request(topic, 0, max_wait_ms=20000), timeout=30)))
        poller.start()
        wait_for(lambda: value(scrape(metrics_port), "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                               delayedOperation="Fetch") == 1, "the fetch to wait in the fetch purgatory")
        _produce(broker, topic, _batch([b"wake"]), acks=1)
        poller.join(30)
        assert _values(results[0].responses[0].partitions[0].records) == [(0, b"wake")]


# --- ListOffsets / OffsetForLeaderEpoch / controller fencing -------------------------------------

def test_list_offsets_and_offset_for_leader_epoch(broker: BrokerProcess) -> None:
    topic = _topic()
    broker.create_topic(topic)
    base = RECENT
    for i in range(5):
        _produce(broker, topic, _batch([b"x", b"y"], timestamp=base + 10 * i))

    def list_offsets(timestamp: int, version: int = 7) -> Any:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
        return broker.request(ApiKey.LIST_OFFSETS, version, request).topics[0].partitions[0]

    assert (list_offsets(-2).offset, list_offsets(-2).leader_epoch) == (0, 0)
    assert (list_offsets(-1).offset, list_offsets(-1).leader_epoch) == (10, 0)
    assert (list_offsets(-3).offset, list_offsets(-3).timestamp) == (9, base + 41)
    assert (list_offsets(base + 15).offset, list_offsets(base + 15).timestamp) == (4, base + 20)
    assert (list_offsets(base + 1000).offset, list_offsets(base + 1000).timestamp) == (-1, -1)
    assert list_offsets(-1, version=0).old_style_offsets == [10]
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=topic, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)])])
    result = broker.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request).topics[0].partitions[0]
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 0, 10)


def test_stale_controller_epoch_is_rejected(broker: BrokerProcess) -> None:
    stale = UpdateMetadataRequest(controller_id=5, controller_epoch=0, broker_epoch=-1, topic_states=[],
                                  live_brokers=[])
    assert broker.request(ApiKey.UPDATE_METADATA, 8, stale).error_code == Errors.STALE_CONTROLLER_EPOCH
    assert [b.node_id for b in broker.metadata().brokers] == [0]  # the cache was left alone


def test_transactional_produce_is_verified_with_the_transaction_coordinator(broker: BrokerProcess) -> None:
    """KIP-890: without a transaction coordinator (no __transaction_state) nothing can verify the
    transaction, which Kafka reports as the retriable NOT_ENOUGH_REPLICAS; without a transactional id
    the request is refused outright. (tests/integration/broker/test_transaction_markers.py covers
    read_committed, with verification off.)"""
    topic = _topic()
    broker.create_topic(topic)
    pid = broker.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000)).producer_id
    txn = _batch([b"txn"], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    assert _produce(broker, topic, txn).error_code == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    for version in (9, 11):
        request = ProduceRequest(transactional_id="t", acks=-1, timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=txn)])])
        answer = broker.request(ApiKey.PRODUCE, version, request).responses[0].partition_responses[0]
        assert answer.error_code == Errors.NOT_ENOUGH_REPLICAS
        assert "COORDINATOR_NOT_AVAILABLE" in answer.error_message
    latest = broker.request(ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])).topics[0].partitions[0]
    assert latest.offset == 0  # nothing was written
