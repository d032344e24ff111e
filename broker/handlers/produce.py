"""Produce (v0-11): validate each partition's records, append as leader, answer per acks.

acks=0 gets no response (the connection is closed instead if anything failed, as Kafka does),
acks=1 is answered after the leader's append, acks=all once the high watermark covers the
append (at once with an ISR of one; otherwise from the produce purgatory).

Transactional batches need the request's transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
and one producer; a producer's first write of a transaction to a partition is verified with its
transaction coordinator first (KIP-890, ``transaction.partition.verification.enable``), without
holding a request handler, and the coordinator's answer becomes a produce error Kafka's way.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.add_partitions_to_txn_manager import TransactionSupportedOperation
from broker.delayed_produce import DelayedProduce
from broker.errors import TYPED_FAILURES, error_of
from broker.handlers import answer, handles
from broker.handlers._group_support import complete_later
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.produce_validator import RecordValidationError, validate_records
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.exceptions import CorruptRecordError
from protocol.messages import ProduceResponse
from protocol.records.batch import ATTRIBUTES_OFFSET, BATCH_LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, \
    TRANSACTIONAL_FLAG_MASK, iter_batch_positions, read_batch_header
from storage.errors import InvalidRecordError
from storage.producer_state import SENTINEL_GUARD, AppendOrigin, VerificationGuard

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse
TopicPartition = tuple[str, int]
Producer = tuple[int, int, int]  # producer id, epoch, base sequence of a transactional batch
GENERIC_ERROR_MIN_VERSION = 11  # knows TRANSACTION_ABORTABLE
# Verification failures older clients would not retry correctly: NOT_ENOUGH_REPLICAS makes them retry
# without refreshing metadata (Kafka's ReplicaManager.handleProduceAppend).
RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({Errors.CONCURRENT_TRANSACTIONS, Errors.NETWORK_EXCEPTION,
                                          Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
                                          Errors.NOT_COORDINATOR})


# Errors Kafka's appendToLocalLog answers without marking FailedProduceRequestsPerSec.
NOT_COUNTED_AS_FAILED = frozenset({Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER,
                                   Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.CORRUPT_MESSAGE,
                                   Errors.KAFKA_STORAGE_ERROR})


def _count_failure(services: BrokerServices, topic: str, error: Errors, records: Any) -> None:
    stats = services.replica_manager.topic_stats
    if error is Errors.MESSAGE_TOO_LARGE:
        stats.mark_bytes_rejected(topic, len(records) if records is not None else 0)
    if error not in NOT_COUNTED_AS_FAILED:
        stats.mark_failed_produce(topic)


def _error_entry(index: int, error: Errors, log_start_offset: int = -1) -> Any:
    """A failed partition; like Kafka, without a message (only record errors carry one)."""
    return PartitionResponse(index=index, error_code=int(error), base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=log_start_offset, error_message=None)


def _record_errors_entry(index: int, exc: RecordValidationError, log_start_offset: int, version: int) -> Any:
    """Records Kafka refuses: the log start offset when found at append, KIP-467 record errors (v8+)."""
    entry = _error_entry(index, exc.error, log_start_offset if exc.at_append else -1)
    if version >= 8 and exc.record_errors:
        entry.error_message = exc.message
        entry.record_errors = [ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                               for i, m in exc.record_errors]
    return entry


def _response(entries: dict[str, list[Any]], node_endpoints: list[Any] | None = None) -> Any:
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name=topic, partition_responses=parts)
                                      for topic, parts in entries.items()], throttle_time_ms=0,
                           node_endpoints=node_endpoints or [])


def _leader_hints(services: BrokerServices, request: Request, entries: dict[str, list[Any]]) -> list[Any]:
    """KIP-951 (v10+): where the partitions answered NOT_LEADER_OR_FOLLOWER are led now."""
    endpoints: dict[int, Any] = {}
    for topic, parts in entries.items():
        for entry in parts:
            if entry.error_code != Errors.NOT_LEADER_OR_FOLLOWER:
                continue
            leader, epoch, node = services.metadata_cache.current_leader(topic, entry.index, request.listener_name)
            entry.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            if node is not None:
                endpoints[node[0]] = ProduceResponse.NodeEndpoint(node_id=node[0], host=node[1], port=node[2],
                                                                  rack=node[3])
    return [endpoints[k] for k in sorted(endpoints)]


def error_response(request: Request, error: Errors) -> Any:
    """Every partition with ``error``; None (close the connection, as Kafka does) for acks=0."""
    body = request.body()
    if body.acks == 0:
        return None
    return _response({t.name: [_error_entry(p.index, error) for p in t.partition_data] for t in body.topic_data})


def _transactional_producer(records: Any) -> Producer | None:
    """The producer of the partition's first transactional batch (batch headers only), None if none.
    Broken framing is left for ``validate_records`` to answer."""
    if not records:
        return None
    total = len(records)
    if total > ATTRIBUTES_OFFSET + 1 and records[MAGIC_OFFSET] == 2 \
            and not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK \
            and int.from_bytes(records[BATCH_LENGTH_OFFSET:BATCH_LENGTH_OFFSET + 4], "big") + LOG_OVERHEAD == total:
        return None  # one plain v2 batch, the usual partition: no generator over its positions
    try:
        for position, size in iter_batch_positions(records):
            if size > ATTRIBUTES_OFFSET + 1 and records[position + MAGIC_OFFSET] == 2 \
                    and records[position + ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK:
                header = read_batch_header(records, position)
                return header.producer_id, header.producer_epoch, header.base_sequence
    except CorruptRecordError:
        return None
    return None


def _verification_failure(error: Errors) -> tuple[Errors, str | None]:
    """A partition the coordinator did not verify, as the produce response reports it (Kafka sets a
    message only where it translates the error)."""
    if error is Errors.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error in RETRY_AS_NOT_ENOUGH_REPLICAS:
        return Errors.NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added to the transaction. "
                                            f"Underlying error: {error.name}")
    return error, None


async def _append_partition(services: BrokerServices, topic: str, index: int, records: Any, version: int,
                            acks: int, verification_guard: VerificationGuard) -> tuple[Any, int]:
    """Append one partition; (response entry, offset the HW must reach for acks=all or -1)."""
    replica_manager = services.replica_manager
    replica_manager.topic_stats.mark_produce(topic)
    log_start_offset = -1
    try:
        partition, tp_log = replica_manager.leader_partition_and_log(topic, index)
        log_start_offset = tp_log.log_start_offset
        to_append, parsed = validate_records(records, version, tp_log.config, tp_log.topic_partition)
        if len(to_append) == 0:
            return PartitionResponse(index=index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                     log_start_offset=log_start_offset), -1
        info = replica_manager.try_append_to_partition(partition, tp_log, to_append, acks, AppendOrigin.CLIENT,
                                                       verification_guard, parsed)
        if info is None:  # a roll or an fsync is due: in the I/O pool
            info = await replica_manager.append_to_partition_blocking(partition, tp_log, to_append,
                                                                      AppendOrigin.CLIENT, verification_guard, parsed)
    except RecordValidationError as exc:
        log.info("Produce to %s-%d refused (%s): %s", topic, index, exc.error.name, exc.message)
        _count_failure(services, topic, exc.error, records)
        return _record_errors_entry(index, exc, log_start_offset, version), -1
    except TYPED_FAILURES as exc:
        error = error_of(exc)
        assert error is not None
        log.debug("Produce to %s-%d failed: %s", topic, index, exc)
        _count_failure(services, topic, error, records)
        # Records the log refuses at append (Kafka's InvalidRecordException) are answered with the log start.
        return _error_entry(index, error, log_start_offset if isinstance(exc, InvalidRecordError) else -1), -1
    return PartitionResponse(index=index, error_code=0, base_offset=info.first_offset,
                             log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset), \
        info.last_offset + 1


@handles(ApiKey.PRODUCE, error_response=error_response)
async def handle_produce(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    acks = body.acks
    if acks not in (-1, 0, 1):
        return Response.send(request, error_response(request, Errors.INVALID_REQUIRED_ACKS))
    producers: dict[TopicPartition, Producer] = {}
    for t in body.topic_data:
        for p in t.partition_data:
            producer = _transactional_producer(p.records)
            if producer is not None:
                producers[(t.name, p.index)] = producer
    auth = services.auth
    if producers and (body.transactional_id is None or not auth.authorize(
            request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id)):
        error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return Response.close(request) if acks == 0 else Response.send(request, error_response(request, error))
    # Partitions of topics the request may not WRITE fail alone and are neither verified nor appended.
    denied: dict[TopicPartition, Errors] = {}
    if auth.authorizer is not None:
        writable = auth.filter_authorized(request, AclOperation.WRITE, ResourceType.TOPIC, body.topic_data,
                                          lambda t: t.name)
        denied = {(t.name, p.index): Errors.TOPIC_AUTHORIZATION_FAILED for t in body.topic_data
                  for p in t.partition_data if t.name not in writable}
        producers = {tp: producer for tp, producer in producers.items() if tp not in denied}
    if not producers:
        return await _append_all(services, request, denied, {})
    if len({(pid, epoch) for pid, epoch, _ in producers.values()}) > 1:  # transactional records of two producers
        error = Errors.INVALID_PRODUCER_ID_MAPPING
        return Response.close(request) if acks == 0 else Response.send(request, error_response(request, error))
    producer_id, epoch, _ = next(iter(producers.values()))
    errors, guards = services.replica_manager.start_transaction_verification(
        body.transactional_id, producer_id, epoch, {tp: seq for tp, (_, _, seq) in producers.items()})
    errors.update(denied)
    if not guards:
        return await _append_all(services, request, errors, guards)
    operation = TransactionSupportedOperation.GENERIC_ERROR if request.api_version >= GENERIC_ERROR_MIN_VERSION \
        else TransactionSupportedOperation.DEFAULT_ERROR

    async def verify_then_append() -> Response | None:
        manager = services.replica_manager.add_partitions_to_txn_manager
        assert manager is not None
        errors.update(await manager.verify_transaction(body.transactional_id, producer_id, epoch, list(guards),
                                                       operation))
        return await _append_all(services, request, errors, guards)

    complete_later(services, request, verify_then_append())
    return None


async def _append_all(services: BrokerServices, request: Request, failed: dict[TopicPartition, Errors],
                      guards: dict[TopicPartition, VerificationGuard]) -> Response | None:
    """Append every partition not ``failed`` in verification; the response, or None once it waits for acks."""
    body = request.body()
    version = request.api_version
    acks = body.acks
    entries: dict[str, list[Any]] = {}
    waiting: dict[tuple[str, int], tuple[int, Any]] = {}
    for topic_data in body.topic_data:
        for p in topic_data.partition_data:
            tp = (topic_data.name, p.index)
            if tp in failed:
                error, message = _verification_failure(failed[tp])
                entry, required = _error_entry(p.index, error), -1
                if version >= 8:
                    entry.error_message = message
            else:
                entry, required = await _append_partition(services, topic_data.name, p.index, p.records, version,
                                                           acks, guards.get(tp, SENTINEL_GUARD))
            entries.setdefault(topic_data.name, []).append(entry)
            if acks == -1 and required >= 0 and entry.error_code == 0:
                waiting[tp] = (required, entry)
    if acks == 0:
        failed_any = any(e.error_code for parts in entries.values() for e in parts)
        return Response.close(request) if failed_any else Response.no_op(request)
    hints = _leader_hints(services, request, entries) if version >= 10 else None
    if not waiting:
        return Response.send(request, _response(entries, hints))
    channel = services.request_channel
    operation = DelayedProduce(body.timeout_ms, services.replica_manager, waiting,
                               lambda: channel.send_response(answer(request, lambda: _response(entries, hints))))
    # Answered by the operation's on_complete, now or when the ISR catches up or time runs out.
    services.replica_manager.produce_purgatory.try_complete_else_watch(operation, list(waiting))
    request.processor.request_parked(request)  # appended: the connection's next request may go ahead
    return None
