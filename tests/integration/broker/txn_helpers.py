"""Raw requests for the partition side of transactions: transactional batches, WriteTxnMarkers,
read_committed Fetch, ListOffsets with an isolation level, the .txnindex a broker wrote."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from protocol.api_keys import ApiKey
from protocol.messages import (
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.transaction_index import ENTRY_SIZE, AbortedTxn
from tests.harness.broker import BrokerProcess

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def txn_batch(values: list[bytes], producer_id: int, sequence: int, epoch: int = 0) -> bytearray:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                 is_transactional=True)
    now = int(time.time() * 1000)  # markers carry the current time: an old timestamp would roll a segment
    for value in values:
        builder.append(now, b"k", value)
    return builder.build()


def produce(broker: BrokerProcess, topic: str, records: Any, transactional_id: str | None = "txn",
            partition: int = 0, version: int = 9) -> Any:
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    return broker.request(ApiKey.PRODUCE, version, request).responses[0].partition_responses[0]


def write_markers(broker: BrokerProcess, producer_id: int, commit: bool, partitions: dict[str, list[int]],
                  epoch: int = 0, coordinator_epoch: int = 0, timeout: float = 15.0) -> dict[tuple[str, int], int]:
    """WriteTxnMarkers v1 for one producer; the error code of every partition."""
    request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                for t, ps in partitions.items()])])
    (result,) = broker.request(ApiKey.WRITE_TXN_MARKERS, 1, request, timeout=timeout).markers
    assert result.producer_id == producer_id
    return {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}


def fetch(broker: BrokerProcess, topic: str, isolation: int, offset: int = 0, partition: int = 0) -> Any:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=isolation,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                               partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    return broker.request(ApiKey.FETCH, 12, request).responses[0].partitions[0]


def latest_offset(broker: BrokerProcess, topic: str, isolation: int, partition: int = 0) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    answer = broker.request(ApiKey.LIST_OFFSETS, 7, request).topics[0].partitions[0]
    assert answer.error_code == 0
    return answer.offset


def values(records: Any) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every data record (control batches left out)."""
    buf = bytes(records or b"")
    return [(r.offset, r.value) for pos, header in iter_log_entries(buf) if not header.is_control
            for r in decode_entry_records(buf, pos)]


def aborted(partition_data: Any) -> list[tuple[int, int]] | None:
    found = partition_data.aborted_transactions
    return None if found is None else [(t.producer_id, t.first_offset) for t in found]


def txn_index_entries(broker: BrokerProcess, topic: str, partition: int = 0) -> list[AbortedTxn]:
    """Every AbortedTxn in the partition's .txnindex files, as the broker wrote them."""
    entries = []
    for path in sorted(Path(broker.log_dir, f"{topic}-{partition}").glob("*.txnindex")):
        data = path.read_bytes()
        assert len(data) % ENTRY_SIZE == 0
        entries += [AbortedTxn.decode(data, pos) for pos in range(0, len(data), ENTRY_SIZE)]
    return entries


def init_producer_id(broker: BrokerProcess) -> int:
    from protocol.messages import InitProducerIdRequest

    return broker.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000)).producer_id

