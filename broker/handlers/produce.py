"""Produce (v0-11): validate each partition's records, append as leader, answer per acks.

acks=0 gets no response (the connection is closed instead if anything failed, as Kafka does),
acks=1 is answered after the leader's append, acks=all once the high watermark covers the
append (at once with an ISR of one; otherwise from the produce purgatory).
"""

from __future__ import annotations

import logging
from typing import Any

from broker.delayed_produce import DelayedProduce
from broker.handlers import handles
from broker.errors import error_of
from broker.produce_validator import RecordValidationError, validate_records
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.errors import CoordinationError
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import ProduceResponse
from protocol.records.batch import ATTRIBUTES_OFFSET, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK
from storage.errors import StorageError

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse


def _error_entry(index: int, error: Errors, message: str | None = None) -> Any:
    return PartitionResponse(index=index, error_code=int(error), base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message)


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
    body = request.body()
    return _response({t.name: [_error_entry(p.index, error) for p in t.partition_data] for t in body.topic_data})


async def _append_partition(services: BrokerServices, topic: str, index: int, records: Any, version: int,
                            acks: int) -> tuple[Any, int]:
    """Append one partition; (response entry, offset the HW must reach for acks=all or -1)."""
    replica_manager = services.replica_manager
    try:
        partition = replica_manager.leader_partition(topic, index)
        tp_log = partition.leader_log()
        to_append = validate_records(records, version, tp_log.config.compression_type,
                                     compacted=tp_log.config.compact_enabled)
        if len(to_append) == 0:
            return PartitionResponse(index=index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                     log_start_offset=tp_log.log_start_offset), -1
        info = await replica_manager.append_to_leader(topic, index, to_append, acks)
    except RecordValidationError as exc:
        entry = _error_entry(index, exc.error, exc.message)
        if version >= 8 and exc.record_index is not None:
            entry.record_errors = [ProduceResponse.BatchIndexAndErrorMessage(
                batch_index=exc.record_index, batch_index_error_message=exc.message)]
        return entry, -1
    except (KafkaApiError, StorageError, CoordinationError) as exc:
        error = error_of(exc)
        assert error is not None
        log.debug("Produce to %s-%d failed: %s", topic, index, exc)
        return _error_entry(index, error, str(exc) if version >= 8 else None), -1
    return PartitionResponse(index=index, error_code=0, base_offset=info.first_offset,
                             log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset), \
        info.last_offset + 1


def is_transactional(records: Any) -> bool:
    """Is the first batch transactional (Kafka's RequestUtils.hasTransactionalRecords looks no further)?"""
    if records is None or len(records) < RECORD_BATCH_OVERHEAD or records[MAGIC_OFFSET] != 2:
        return False
    return bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK)  # the low byte of the int16


def _transactional_id_authorized(services: BrokerServices, request: Request, body: Any) -> bool:
    """Transactional records need WRITE on the request's transactional id (Kafka's handleProduceRequest)."""
    if services.auth.authorizer is None or not any(
            is_transactional(p.records) for t in body.topic_data for p in t.partition_data):
        return True
    transactional_id = getattr(body, "transactional_id", None)
    return transactional_id is not None and services.auth.authorize(
        request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


@handles(ApiKey.PRODUCE, error_response=error_response)
async def handle_produce(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    acks = body.acks
    if acks not in (-1, 0, 1):
        if acks == 0:
            return Response.close(request)
        return Response.send(request, error_response(request, Errors.INVALID_REQUIRED_ACKS))
    if not _transactional_id_authorized(services, request, body):
        return Response.send(request, error_response(request, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    writable = services.auth.filter_authorized(request, AclOperation.WRITE, ResourceType.TOPIC, body.topic_data,
                                               lambda t: t.name)
    entries: dict[str, list[Any]] = {}
    waiting: dict[tuple[str, int], tuple[int, Any]] = {}
    for topic_data in body.topic_data:
        for p in topic_data.partition_data:
            if topic_data.name not in writable:
                entries.setdefault(topic_data.name, []).append(_error_entry(p.index, Errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            entry, required = await _append_partition(services, topic_data.name, p.index, p.records, version, acks)
            entries.setdefault(topic_data.name, []).append(entry)
            if acks == -1 and required >= 0 and entry.error_code == 0:
                waiting[(topic_data.name, p.index)] = (required, entry)
    if acks == 0:
        failed = any(e.error_code for parts in entries.values() for e in parts)
        return Response.close(request) if failed else Response.no_op(request)
    hints = _leader_hints(services, request, entries) if version >= 10 else None
    if not waiting:
        return Response.send(request, _response(entries, hints))
    channel = services.request_channel
    operation = DelayedProduce(body.timeout_ms, services.replica_manager, waiting,
                               lambda: channel.send_response(Response.send(request, _response(entries, hints))))
    # Answered by the operation's on_complete, now or when the ISR catches up or time runs out.
    services.replica_manager.produce_purgatory.try_complete_else_watch(operation, list(waiting))
    return None
