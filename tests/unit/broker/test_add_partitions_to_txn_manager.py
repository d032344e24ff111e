"""AddPartitionsToTxnManager against a raw AddPartitionsToTxn answerer on a real socket: the
verify-only request it sends, batching per coordinator, Kafka's error translations, and failures."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.add_partitions_to_txn_manager import (
    TRANSACTION_STATE_TOPIC,
    AddPartitionsToTxnManager,
    TransactionSupportedOperation,
)
from broker.coordinator.internal_topic import partition_for
from broker.handlers.produce import _verification_failure
from broker.metadata_cache import BrokerNode, MetadataCache, PartitionMetadata
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.framing import decode_request, encode_response
from protocol.messages import AddPartitionsToTxnResponse as R

DEFAULT, GENERIC = TransactionSupportedOperation.DEFAULT_ERROR, TransactionSupportedOperation.GENERIC_ERROR
Answer = Callable[[Any], Any]  # request body -> response body


class Coordinator:
    """A TCP server answering AddPartitionsToTxn with ``answer``; ``gate`` holds answers back."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[tuple[int, Any]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                header, body = decode_request(await reader.readexactly(size))
                self.requests.append((header.api_version, body))
                await self.gate.wait()
                response = self.answer(body)
                if response is None:
                    writer.close()
                    return
                writer.write(encode_response(response, ApiKey.ADD_PARTITIONS_TO_TXN, header.api_version,
                                             header.correlation_id))
        except asyncio.IncompleteReadError:
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()


def answer_with(errors: dict[tuple[str, int], Errors]) -> Answer:
    """Every requested partition answered NONE unless ``errors`` names it."""
    def answer(body: Any) -> Any:
        return R(throttle_time_ms=0, error_code=0, results_by_transaction=[R.AddPartitionsToTxnResult(
            transactional_id=t.transactional_id, topic_results=[R.AddPartitionsToTxnTopicResult(
                name=topic.name, results_by_partition=[R.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=int(errors.get((topic.name, p), Errors.NONE)))
                    for p in topic.partitions]) for topic in t.topics]) for t in body.transactions])
    return answer


def manager_for(port: int | None, partitions: int = 3) -> AddPartitionsToTxnManager:
    cache = MetadataCache(0)
    if port is not None:
        cache.brokers[1] = BrokerNode(1, None, {"PLAINTEXT": ("127.0.0.1", port)})
        cache.partitions[TRANSACTION_STATE_TOPIC] = {
            p: PartitionMetadata(TRANSACTION_STATE_TOPIC, p, 1, 1, 0, [1], 0, [1]) for p in range(partitions)}
    return AddPartitionsToTxnManager(0, cache, "PLAINTEXT", 50, timeout_s=5)


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 20))


def test_no_transaction_state_topic_means_no_coordinator() -> None:
    async def scenario() -> Any:
        manager = manager_for(None)
        return await manager.verify_transaction("t", 1, 0, [("a", 0)], DEFAULT)

    assert run(scenario) == {("a", 0): Errors.COORDINATOR_NOT_AVAILABLE}


def test_verify_only_request_and_error_translations() -> None:
    refused = {("a", 1): Errors.TRANSACTION_ABORTABLE, ("b", 0): Errors.PRODUCER_FENCED}

    async def scenario() -> Any:
        coordinator = Coordinator(answer_with(refused))
        manager = manager_for(await coordinator.start())
        old = await manager.verify_transaction("t", 7, 2, [("a", 0), ("a", 1), ("b", 0)], DEFAULT)
        new = await manager.verify_transaction("t", 7, 2, [("a", 1)], GENERIC)
        await manager.shutdown()
        await coordinator.close()
        return coordinator.requests, old, new

    requests, old, new = run(scenario)
    version, body = requests[0]
    (txn,) = body.transactions
    assert version == 5 and txn.verify_only and (txn.transactional_id, txn.producer_id, txn.producer_epoch) == ("t", 7, 2)
    assert {t.name: sorted(t.partitions) for t in txn.topics} == {"a": [0, 1], "b": [0]}
    # Produce <= v10 does not know TRANSACTION_ABORTABLE; producers expect INVALID_PRODUCER_EPOCH, not fenced
    assert old == {("a", 1): Errors.INVALID_TXN_STATE, ("b", 0): Errors.INVALID_PRODUCER_EPOCH}
    assert new == {("a", 1): Errors.TRANSACTION_ABORTABLE}


def test_requests_are_batched_per_coordinator_one_in_flight() -> None:
    async def scenario() -> Any:
        coordinator = Coordinator(answer_with({}))
        manager = manager_for(await coordinator.start())
        coordinator.gate.clear()
        first = manager.verify_transaction("one", 1, 0, [("a", 0)], DEFAULT)
        while not coordinator.requests:  # the first request is in flight, its answer held back
            await asyncio.sleep(0.01)
        retried = manager.verify_transaction("two", 2, 0, [("a", 0)], DEFAULT)
        retry = manager.verify_transaction("two", 2, 0, [("a", 1)], DEFAULT)  # same epoch: a client retry
        fenced = manager.verify_transaction("three", 3, 1, [("a", 0)], DEFAULT)
        fencing = manager.verify_transaction("three", 3, 2, [("a", 0)], DEFAULT)
        late = manager.verify_transaction("three", 3, 1, [("a", 0)], DEFAULT)  # older than what is queued
        coordinator.gate.set()
        results = [await f for f in (first, retried, retry, fenced, fencing, late)]
        await manager.shutdown()
        await coordinator.close()
        return coordinator.requests, results

    requests, results = run(scenario)
    assert [[t.transactional_id for t in body.transactions] for _, body in requests] == [["one"], ["two", "three"]]
    assert [t.producer_epoch for t in requests[1][1].transactions] == [0, 2]
    assert results == [{}, {("a", 0): Errors.NETWORK_EXCEPTION}, {}, {("a", 0): Errors.INVALID_PRODUCER_EPOCH}, {},
                       {("a", 0): Errors.INVALID_PRODUCER_EPOCH}]


def test_request_level_errors_and_lost_connections() -> None:
    async def scenario() -> Any:
        unauthorized = Coordinator(lambda body: R(throttle_time_ms=0, error_code=int(Errors.CLUSTER_AUTHORIZATION_FAILED),
                                                  results_by_transaction=[]))
        manager = manager_for(await unauthorized.start())
        denied = await manager.verify_transaction("t", 1, 0, [("a", 0)], DEFAULT)
        await manager.shutdown()
        await unauthorized.close()
        hanging_up = Coordinator(lambda body: None)
        manager = manager_for(await hanging_up.start())
        lost = await manager.verify_transaction("t", 1, 0, [("a", 0)], DEFAULT)
        await manager.shutdown()
        await hanging_up.close()
        return denied, lost

    denied, lost = run(scenario)
    assert denied == {("a", 0): Errors.INVALID_TXN_STATE}  # never CLUSTER_AUTHORIZATION_FAILED to a client
    assert lost == {("a", 0): Errors.NETWORK_EXCEPTION}


def test_the_coordinator_is_the_leader_of_the_ids_transaction_state_partition() -> None:
    manager = manager_for(9092, partitions=50)
    manager.metadata_cache.partitions[TRANSACTION_STATE_TOPIC][partition_for("my-txn", 50)].leader = -1
    assert manager.coordinator("my-txn") is None
    assert manager.coordinator("other-txn") == (1, ("127.0.0.1", 9092))


def test_produce_reports_verification_failures_as_kafka_does() -> None:
    assert _verification_failure(Errors.INVALID_TXN_STATE) == (
        Errors.INVALID_TXN_STATE, "Partition was not added to the transaction")
    for retriable in (Errors.CONCURRENT_TRANSACTIONS, Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_NOT_AVAILABLE,
                      Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR):
        error, message = _verification_failure(retriable)
        assert error is Errors.NOT_ENOUGH_REPLICAS and retriable.name in message
    assert _verification_failure(Errors.INVALID_PRODUCER_EPOCH) == (Errors.INVALID_PRODUCER_EPOCH, None)
