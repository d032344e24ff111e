"""Produce (v0-11): validate each partition's records, append as leader, answer per acks.

acks=0 gets no response (the connection is closed instead if anything failed, as Kafka does),
acks=1 is answered after the leader's append, acks=all once the high watermark covers the
append (at once with an ISR of one; otherwise from the produce purgatory).
"""

from __future__ import annotations

import logging
from typing import Any

from broker.delayed_produce import DelayedProduce
from broker.handlers import answer, handles
from broker.errors import error_of
from broker.produce_validator import RecordValidationError, validate_records
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.errors import CoordinationError
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import ProduceResponse
from storage.errors import InvalidRecordError, StorageError

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse


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


async def _append_partition(services: BrokerServices, topic: str, index: int, records: Any, version: int,
                            acks: int) -> tuple[Any, int]:
    """Append one partition; (response entry, offset the HW must reach for acks=all or -1)."""
    replica_manager = services.replica_manager
    log_start_offset = -1
    try:
        partition = replica_manager.leader_partition(topic, index)
        tp_log = partition.leader_log()
        log_start_offset = tp_log.log_start_offset
        to_append = validate_records(records, version, tp_log.config, f"{topic}-{index}")
        if len(to_append) == 0:
            return PartitionResponse(index=index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                     log_start_offset=tp_log.log_start_offset), -1
        info = await replica_manager.append_to_leader(topic, index, to_append, acks)
    except RecordValidationError as exc:
        log.info("Produce to %s-%d refused (%s): %s", topic, index, exc.error.name, exc.message)
        return _record_errors_entry(index, exc, log_start_offset, version), -1
    except (KafkaApiError, StorageError, CoordinationError) as exc:
        error = error_of(exc)
        assert error is not None
        log.debug("Produce to %s-%d failed: %s", topic, index, exc)
        # Records the log refuses at append (Kafka's InvalidRecordException) are answered with the log start.
        return _error_entry(index, error, log_start_offset if isinstance(exc, InvalidRecordError) else -1), -1
    return PartitionResponse(index=index, error_code=0, base_offset=info.first_offset,
                             log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset), \
        info.last_offset + 1


@handles(ApiKey.PRODUCE, error_response=error_response)
async def handle_produce(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    acks = body.acks
    if acks not in (-1, 0, 1):
        return Response.send(request, error_response(request, Errors.INVALID_REQUIRED_ACKS))
    entries: dict[str, list[Any]] = {}
    waiting: dict[tuple[str, int], tuple[int, Any]] = {}
    for topic_data in body.topic_data:
        for p in topic_data.partition_data:
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
                               lambda: channel.send_response(answer(request, lambda: _response(entries, hints))))
    # Answered by the operation's on_complete, now or when the ISR catches up or time runs out.
    services.replica_manager.produce_purgatory.try_complete_else_watch(operation, list(waiting))
    return None
