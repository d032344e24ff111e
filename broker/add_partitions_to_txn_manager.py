"""AddPartitionsToTxnManager: asks transaction coordinators whether partitions are in a transaction.

KIP-890 part 1: before a producer's first transactional write to a partition it leads, the
broker sends the coordinator of the transactional id (the leader of its ``__transaction_state``
partition) a verify-only AddPartitionsToTxn (v4+). Verifications are batched per coordinator:
at most one request is in flight to a broker, and what arrives meanwhile goes out together in
the next one, one entry per transactional id (a newer request for the same id replaces a queued
one, as in Kafka's AddPartitionsToTxnManager).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.security.client_security import PLAINTEXT, ClientSecurity
from broker.coordinator.internal_topic import InternalTopicPartitions
from broker.coordinator.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC
from broker.network.network_client import NETWORK_ERRORS, NetworkClient
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

VERIFY_VERSION = 5  # Kafka's AddPartitionsToTxnRequest.Builder.forBroker: the latest version
TopicPartition = tuple[str, int]
VerificationResult = dict[TopicPartition, Errors]  # only the partitions that failed


class TransactionSupportedOperation(enum.Enum):
    """What the requester's version understands (Kafka's TransactionSupportedOperation)."""

    DEFAULT_ERROR = "defaultError"  # Produce <= v10, TxnOffsetCommit <= v3: no TRANSACTION_ABORTABLE
    GENERIC_ERROR = "genericError"  # Produce v11, TxnOffsetCommit v4


@dataclass
class _Verification:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    operation: TransactionSupportedOperation
    future: asyncio.Future[VerificationResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def fail(self, error: Errors) -> None:
        if not self.future.done():
            self.future.set_result({tp: error for tp in self.partitions})

    def complete(self, errors: VerificationResult) -> None:
        if not self.future.done():
            self.future.set_result(errors)


def partition_error(code: int, operation: TransactionSupportedOperation) -> Errors:
    """A coordinator's per-partition answer as the waiting request reports it."""
    error = Errors(code)
    if error is Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH  # what producers expect from a produce
    if error is Errors.TRANSACTION_ABORTABLE and operation is TransactionSupportedOperation.DEFAULT_ERROR:
        return Errors.INVALID_TXN_STATE  # older clients do not know TRANSACTION_ABORTABLE
    return error


class AddPartitionsToTxnManager:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, listener_name: str,
                 transaction_state_partitions: int, timeout_s: float, security: ClientSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.security = security  # TLS and SASL of the inter-broker listener
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.timeout_s = timeout_s
        self._partitions = InternalTopicPartitions(TRANSACTION_STATE_TOPIC, metadata_cache,
                                                   transaction_state_partitions)
        self._queued: dict[int, dict[str, _Verification]] = {}  # coordinator id -> transactional id -> entry
        self._senders: dict[int, asyncio.Task[None]] = {}  # one in-flight request per coordinator
        self._clients: dict[int, NetworkClient] = {}

    def coordinator(self, transactional_id: str) -> tuple[int, tuple[str, int]] | None:
        """(broker id, endpoint) of the transactional id's coordinator, None if there is none now."""
        state = self.metadata_cache.partition(TRANSACTION_STATE_TOPIC, self._partitions.partition_for(transactional_id))
        if state is None or state.leader < 0:
            return None
        endpoint = self.metadata_cache.broker_endpoint(state.leader, self.listener_name)
        return None if endpoint is None else (state.leader, endpoint)

    def verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list[TopicPartition], operation: TransactionSupportedOperation
                           ) -> asyncio.Future[VerificationResult]:
        """The partitions that are not verified, with their error (empty: all are in the transaction)."""
        verification = _Verification(transactional_id, producer_id, producer_epoch, list(partitions), operation)
        found = self.coordinator(transactional_id)
        if found is None:  # no __transaction_state, or no leader: the transaction cannot have started
            verification.fail(Errors.COORDINATOR_NOT_AVAILABLE)
            return verification.future
        node, endpoint = found
        queued = self._queued.setdefault(node, {})
        existing = queued.get(transactional_id)
        if existing is not None:
            if existing.producer_epoch > producer_epoch:  # the incoming request is the fenced one
                verification.fail(Errors.INVALID_PRODUCER_EPOCH)
                return verification.future
            # a newer epoch fences the queued request; the same epoch is a client retry
            existing.fail(Errors.INVALID_PRODUCER_EPOCH if existing.producer_epoch < producer_epoch
                          else Errors.NETWORK_EXCEPTION)
        queued[transactional_id] = verification
        sender = self._senders.get(node)
        if sender is None or sender.done():
            self._senders[node] = asyncio.get_running_loop().create_task(
                self._send_loop(node, endpoint), name=f"add-partitions-to-txn-{node}")
        return verification.future

    async def _send_loop(self, node: int, endpoint: tuple[str, int]) -> None:
        """Send what is queued for ``node``, one request at a time, until nothing is left."""
        while self._queued.get(node):
            batch = list(self._queued.pop(node).values())
            await self._send(node, endpoint, batch)

    def _request(self, batch: list[_Verification]) -> AddPartitionsToTxnRequest:
        transactions = []
        for v in batch:
            topics: dict[str, list[int]] = {}
            for topic, partition in v.partitions:
                topics.setdefault(topic, []).append(partition)
            transactions.append(AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=v.transactional_id, producer_id=v.producer_id, producer_epoch=v.producer_epoch,
                verify_only=True, topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                          for t, ps in topics.items()]))
        return AddPartitionsToTxnRequest(transactions=transactions)

    async def _send(self, node: int, endpoint: tuple[str, int], batch: list[_Verification]) -> None:
        client = self._clients.get(node)
        if client is None:
            client = self._clients[node] = NetworkClient(f"broker-{self.broker_id}-add-partitions-to-txn",
                                                         self.timeout_s, self.security)
        try:
            response = await client.send(endpoint, self._request(batch), ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION)
        except asyncio.CancelledError:  # shutting down: nobody waits forever
            for v in batch:
                v.fail(Errors.NETWORK_EXCEPTION)
            raise
        except NETWORK_ERRORS as exc:
            log.warning("AddPartitionsToTxn to broker %d failed: %s", node, exc)
            for v in batch:
                v.fail(Errors.NETWORK_EXCEPTION)
            return
        self._complete(node, batch, response)

    @staticmethod
    def _complete(node: int, batch: list[_Verification], response: AddPartitionsToTxnResponse) -> None:
        if response.error_code:
            error = Errors(response.error_code)
            log.error("AddPartitionsToTxn to broker %d returned %s", node, error.name)
            # clients must not see CLUSTER_AUTHORIZATION_FAILED: the verification simply did not succeed
            for v in batch:
                v.fail(Errors.INVALID_TXN_STATE if error is Errors.CLUSTER_AUTHORIZATION_FAILED else error)
            return
        by_id = {v.transactional_id: v for v in batch}
        for result in response.results_by_transaction:
            v = by_id.pop(result.transactional_id, None)
            if v is None:
                continue
            v.complete({(topic.name, p.partition_index): partition_error(p.partition_error_code, v.operation)
                        for topic in result.topic_results for p in topic.results_by_partition
                        if p.partition_error_code})
        for v in by_id.values():  # a coordinator that left one out: it was not verified
            v.fail(Errors.INVALID_TXN_STATE)

    async def shutdown(self) -> None:
        for sender in self._senders.values():
            sender.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        for queued in self._queued.values():
            for v in queued.values():
                v.fail(Errors.NETWORK_EXCEPTION)
        self._queued.clear()
        for client in self._clients.values():
            client.close()
