"""Raw transaction requests for the transaction tests on real broker processes: the coordinator's
APIs (FindCoordinator, InitProducerId, AddPartitions/AddOffsets, EndTxn, Describe/ListTransactions)
and the partition side (transactional batches, WriteTxnMarkers, read_committed Fetch, ListOffsets with
an isolation level, the .txnindex a broker wrote)."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.transaction_index import ENTRY_SIZE, AbortedTxn
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for

TRANSACTION_KEY_TYPE = 1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
A = AddPartitionsToTxnRequest
TopicPartition = tuple[str, int]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def find_coordinator(broker: BrokerProcess, transactional_id: str) -> tuple[Errors, int]:
    response = broker.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=TRANSACTION_KEY_TYPE, coordinator_keys=[transactional_id]))
    (found,) = response.coordinators
    return Errors(found.error_code), found.node_id


def wait_for_coordinator(broker: BrokerProcess, transactional_id: str, timeout: float = 60.0) -> int:
    """FindCoordinator until the id has one (the first call creates __transaction_state)."""
    def probe() -> int | None:
        error, node = find_coordinator(broker, transactional_id)
        return node + 1 if error is Errors.NONE else None  # +1: node 0 is truthy

    return wait_for(probe, f"a transaction coordinator for {transactional_id}", timeout) - 1


def init_producer_id(broker: BrokerProcess, transactional_id: str | None, timeout_ms: int = 60000,
                     version: int = 5, producer_id: int = -1, producer_epoch: int = -1) -> Any:
    fields: dict[str, Any] = {"producer_id": producer_id, "producer_epoch": producer_epoch} if version >= 3 else {}
    return broker.request(ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, **fields))


def begin(broker: BrokerProcess, transactional_id: str, timeout_ms: int = 60000) -> tuple[int, int]:
    """InitProducerId (retried while the coordinator loads or completes an earlier transaction)."""
    def attempt() -> tuple[int, int] | None:
        response = init_producer_id(broker, transactional_id, timeout_ms)
        if response.error_code in (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.CONCURRENT_TRANSACTIONS,
                                   Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE):
            return None
        assert response.error_code == Errors.NONE, Errors(response.error_code)
        return response.producer_id, response.producer_epoch

    return wait_for(attempt, f"InitProducerId for {transactional_id}")


def add_partitions(broker: BrokerProcess, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: list[TopicPartition], version: int = 3) -> dict[TopicPartition, Errors]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    topics = [A.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    response = broker.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, A(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch, v3_and_below_topics=topics))
    return {(t.name, p.partition_index): Errors(p.partition_error_code)
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def verify_partitions(broker: BrokerProcess, transactional_id: str, producer_id: int, producer_epoch: int,
                      partitions: list[TopicPartition], version: int = 5) -> dict[TopicPartition, Errors]:
    """The verify-only form a partition leader sends (KIP-890 part 1)."""
    response = broker.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=True,
        topics=[A.AddPartitionsToTxnTopic(name=t, partitions=[p]) for t, p in partitions])]))
    (result,) = response.results_by_transaction
    return {(t.name, p.partition_index): Errors(p.partition_error_code)
            for t in result.topic_results for p in t.results_by_partition}


def end_txn(broker: BrokerProcess, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
            version: int = 4) -> Errors:
    return Errors(broker.request(ApiKey.END_TXN, version, EndTxnRequest(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        committed=commit)).error_code)


def describe(broker: BrokerProcess, transactional_id: str) -> Any:
    (state,) = broker.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
        transactional_ids=[transactional_id])).transaction_states
    return state


def list_transactions(broker: BrokerProcess, states: list[str] | None = None, producer_ids: list[int] | None = None,
                      duration_ms: int = -1, version: int = 1) -> Any:
    fields: dict[str, Any] = {"duration_filter": duration_ms} if version >= 1 else {}
    return broker.request(ApiKey.LIST_TRANSACTIONS, version, ListTransactionsRequest(
        state_filters=states or [], producer_id_filters=producer_ids or [], **fields))


def produce_transactional(broker: BrokerProcess, transactional_id: str, producer_id: int, producer_epoch: int,
                          topic: str, partition: int, values: list[bytes], base_sequence: int = 0) -> Errors:
    """One transactional batch (acks=all), as a transactional producer sends it after AddPartitionsToTxn."""
    batch = txn_batch(values, producer_id, base_sequence, producer_epoch)
    return Errors(produce(broker, topic, batch, transactional_id, partition).error_code)


def add_offsets(broker: BrokerProcess, transactional_id: str, producer_id: int, producer_epoch: int, group: str,
                version: int = 3) -> Errors:
    return Errors(broker.request(ApiKey.ADD_OFFSETS_TO_TXN, version, AddOffsetsToTxnRequest(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        group_id=group)).error_code)


# --- the partition side ------------------------------------------------------------------------------

def idempotent_producer_id(broker: BrokerProcess) -> int:
    """A producer id of one's own, for batches written without a coordinator (markers sent by hand)."""
    return broker.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000)).producer_id


def txn_batch(values: list[bytes], producer_id: int, sequence: int, epoch: int = 0) -> bytearray:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                 is_transactional=True)
    now = int(time.time() * 1000)  # markers carry the current time: an old timestamp would roll a segment
    for value in values:
        builder.append(now, b"k", value)
    return builder.build()


def produce(broker: BrokerProcess, topic: str, records: Any, transactional_id: str | None = "txn",
            partition: int = 0, version: int = 9) -> Any:
    """A Produce (acks=all) of ``records`` to one partition; that partition's answer."""
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
