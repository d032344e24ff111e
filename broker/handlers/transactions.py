"""AddPartitionsToTxn (v0-5), AddOffsetsToTxn (v0-4) and EndTxn (v0-4): a producer's transaction.

AddPartitionsToTxn v0-3 comes from clients (one transaction); v4+ from partition leaders, batched
by transaction, and may be verify-only (KIP-890 part 1: is the partition already in the
transaction?). A transaction naming a partition the cluster does not know fails as a whole:
UNKNOWN_TOPIC_OR_PARTITION for those, OPERATION_NOT_ATTEMPTED for the rest. The answers wait for
the transaction log's replication without holding a request handler.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC
from broker.handlers import handles
from broker.handlers._group_support import group_coordinator, respond_later
from broker.handlers._transaction_support import for_client_version, transaction_coordinator
from broker.handlers.metadata import INTERNAL_TOPICS
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse

TopicPartition = tuple[str, int]
R = AddPartitionsToTxnResponse
FIRST_FENCED_VERSION = 2  # AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2 know PRODUCER_FENCED
FIRST_BROKER_VERSION = 4  # AddPartitionsToTxn v4+: batched, from brokers


def _transactions(request: Request) -> list[tuple[str, int, int, bool, list[TopicPartition]]]:
    """(transactional id, producer id, epoch, verify only, partitions) whatever the version."""
    body = request.body()
    if request.api_version < FIRST_BROKER_VERSION:
        return [(body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                 body.v3_and_below_producer_epoch, False,
                 [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions])]
    return [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
             [(topic.name, p) for topic in t.topics for p in topic.partitions]) for t in body.transactions]


def _topic_results(errors: dict[TopicPartition, Errors]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(R.AddPartitionsToTxnPartitionResult(
            partition_index=partition, partition_error_code=int(error)))
    return [R.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=results)
            for topic, results in by_topic.items()]


def _add_partitions_response(version: int, results: list[tuple[str, dict[TopicPartition, Errors]]]) -> R:
    if version < FIRST_BROKER_VERSION:
        ((_txn_id, errors),) = results
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=[
        R.AddPartitionsToTxnResult(transactional_id=txn_id, topic_results=_topic_results(errors))
        for txn_id, errors in results])


def add_partitions_error_response(request: Request, error: Errors) -> R:
    """Kafka's getErrorResponse: every partition with the error before v4, only the top-level error
    from v4 (a broker's batch, refused as a whole)."""
    if request.api_version >= FIRST_BROKER_VERSION:
        return R(throttle_time_ms=0, error_code=int(error), results_by_transaction=[])
    return _add_partitions_response(request.api_version, [
        (txn_id, dict.fromkeys(partitions, error)) for txn_id, _pid, _epoch, _verify, partitions in _transactions(request)])


def _add_partitions_denied(services: BrokerServices, request: Request) -> Errors | None:
    """v4+ comes from brokers: CLUSTER_ACTION; before, WRITE on the client's transactional id."""
    auth = services.auth
    if request.api_version >= FIRST_BROKER_VERSION:
        return None if auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION) \
            else Errors.CLUSTER_AUTHORIZATION_FAILED
    transactional_id = request.body().v3_and_below_transactional_id
    return None if auth.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id) \
        else Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, error_response=add_partitions_error_response)
async def handle_add_partitions_to_txn(services: BrokerServices, request: Request) -> Response | None:
    version = request.api_version
    denied = _add_partitions_denied(services, request)
    if denied is not None:
        return Response.send(request, add_partitions_error_response(request, denied))
    coordinator = transaction_coordinator(services)
    cache = services.metadata_cache
    auth = services.auth

    async def one(txn_id: str, producer_id: int, epoch: int, verify_only: bool,
                  partitions: list[TopicPartition]) -> tuple[str, dict[TopicPartition, Errors]]:
        # A client's transaction needs WRITE on its (non-internal) topics; brokers were checked above.
        writable = {t for t, _ in partitions} if version >= FIRST_BROKER_VERSION else auth.filter_authorized(
            request, AclOperation.WRITE, ResourceType.TOPIC, partitions, lambda tp: tp[0]) | INTERNAL_TOPICS
        failed = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp[0] not in writable}
        failed.update({tp: Errors.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions
                       if tp not in failed and cache.partition(*tp) is None})
        if failed:
            return txn_id, {tp: failed.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        if verify_only:
            return txn_id, coordinator.handle_verify_partitions_in_transaction(txn_id, producer_id, epoch,
                                                                               set(partitions))
        error = await coordinator.handle_add_partitions_to_transaction(txn_id, producer_id, epoch, set(partitions))
        return txn_id, dict.fromkeys(partitions, for_client_version(error, version, FIRST_FENCED_VERSION))

    async def all_transactions() -> list[tuple[str, dict[TopicPartition, Errors]]]:
        return list(await asyncio.gather(*(one(*txn) for txn in _transactions(request))))

    return respond_later(services, request, all_transactions(),
                         lambda results: _add_partitions_response(version, results))


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(services: BrokerServices, request: Request) -> Response | None:
    """The group's ``__consumer_offsets`` partition joins the transaction (for TxnOffsetCommit)."""
    body = request.body()
    denied = services.auth.transaction_and_group_denied(request, body.transactional_id, body.group_id)
    if denied is not None:
        return Response.send(request, AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(denied)))
    coordinator = transaction_coordinator(services)
    offsets_partition = (GROUP_METADATA_TOPIC, group_coordinator(services).manager.partition_for(body.group_id))
    added = coordinator.handle_add_partitions_to_transaction(body.transactional_id, body.producer_id,
                                                             body.producer_epoch, {offsets_partition})
    return respond_later(services, request, added, lambda error: AddOffsetsToTxnResponse(
        throttle_time_ms=0, error_code=int(for_client_version(error, request.api_version, FIRST_FENCED_VERSION))))


@handles(ApiKey.END_TXN)
async def handle_end_txn(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    ended = transaction_coordinator(services).handle_end_transaction(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
    return respond_later(services, request, ended, lambda error: EndTxnResponse(
        throttle_time_ms=0, error_code=int(for_client_version(error, request.api_version, FIRST_FENCED_VERSION))))
