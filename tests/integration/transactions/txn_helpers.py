"""Raw transaction requests for the transaction coordinator's integration tests (real broker processes)."""
from __future__ import annotations

import time
import uuid
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for

TRANSACTION_KEY_TYPE = 1
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
    from protocol.messages import ProduceRequest
    from protocol.records.builder import RecordBatchBuilder

    builder = RecordBatchBuilder(magic=2, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, is_transactional=True)
    now = int(time.time() * 1000)  # an old timestamp would make the marker roll a new segment
    for value in values:
        builder.append(now, None, value)
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=builder.build())])])
    response = broker.request(ApiKey.PRODUCE, 9, request)
    return Errors(response.responses[0].partition_responses[0].error_code)


def add_offsets(broker: BrokerProcess, transactional_id: str, producer_id: int, producer_epoch: int, group: str,
                version: int = 3) -> Errors:
    from protocol.messages import AddOffsetsToTxnRequest

    return Errors(broker.request(ApiKey.ADD_OFFSETS_TO_TXN, version, AddOffsetsToTxnRequest(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        group_id=group)).error_code)
