"""WriteTxnMarkers (v0-1): the transaction coordinator's COMMIT/ABORT markers, written as leader.

For every marker and partition, a control batch (the marker's producer id and epoch, its
coordinator epoch) is appended with ``AppendOrigin.COORDINATOR`` and acks=all, as Kafka's
KafkaApis.handleWriteTxnMarkersRequest does: a partition this broker does not host answers
UNKNOWN_TOPIC_OR_PARTITION, one it only follows NOT_LEADER_OR_FOLLOWER, a stale coordinator
epoch TRANSACTION_COORDINATOR_FENCED, an older producer epoch INVALID_PRODUCER_EPOCH. Once a
marker is on a ``__consumer_offsets`` partition, the group coordinator materialises (COMMIT) or
drops (ABORT) that producer's pending transactional offsets before the answer goes out.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC
from broker.errors import TYPED_FAILURES, error_of
from broker.handlers import handles
from broker.handlers._group_support import respond_later
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import WriteTxnMarkersResponse
from protocol.records.builder import build_control_batch
from protocol.records.control import ControlRecordType, EndTransactionMarker
from storage.log_segment import now_ms
from storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

R = WriteTxnMarkersResponse
TopicPartition = tuple[str, int]


def _response(errors: dict[int, dict[TopicPartition, Errors]]) -> Any:
    markers = []
    for producer_id, partitions in errors.items():
        topics: dict[str, list[Any]] = {}
        for (topic, index), error in partitions.items():
            topics.setdefault(topic, []).append(R.WritableTxnMarkerPartitionResult(
                partition_index=index, error_code=int(error)))
        markers.append(R.WritableTxnMarkerResult(producer_id=producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=name, partitions=parts) for name, parts in topics.items()]))
    return R(markers=markers)


def error_response(request: Request, error: Errors) -> Any:
    errors: dict[int, dict[TopicPartition, Errors]] = {}
    for marker in request.body().markers:
        errors.setdefault(marker.producer_id, {}).update(
            {(t.name, p): error for t in marker.topics for p in t.partition_indexes})
    return _response(errors)


async def _append_marker(services: BrokerServices, tp: TopicPartition, marker: Any) -> Errors:
    control = ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT
    batch = build_control_batch(EndTransactionMarker(control, marker.coordinator_epoch),
                                producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                                timestamp=now_ms())
    try:
        await services.replica_manager.append_and_wait(tp[0], tp[1], batch, services.config.get("request.timeout.ms"),
                                                       AppendOrigin.COORDINATOR)
    except TYPED_FAILURES as exc:
        error = error_of(exc)
        assert error is not None
        log.debug("Writing the %s marker of producer %d to %s-%d failed: %s", control.name, marker.producer_id,
                  tp[0], tp[1], exc)
        return error
    return Errors.NONE


async def _write_marker(services: BrokerServices, marker: Any) -> dict[TopicPartition, Errors]:
    errors: dict[TopicPartition, Errors] = {}
    hosted: list[TopicPartition] = []
    for topic in marker.topics:
        for index in topic.partition_indexes:
            tp = (topic.name, index)
            if services.replica_manager.local_log(*tp) is None:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                hosted.append(tp)
    results = await asyncio.gather(*(_append_marker(services, tp, marker) for tp in hosted))
    errors.update(zip(hosted, results))
    offsets_partitions = [p for (t, p), e in errors.items() if t == GROUP_METADATA_TOPIC and e is Errors.NONE]
    coordinator = services.group_coordinator
    if offsets_partitions and coordinator is not None:
        coordinator.on_transaction_completed(marker.producer_id, offsets_partitions, bool(marker.transaction_result))
    return errors


async def _write_markers(services: BrokerServices, markers: list[Any]) -> dict[int, dict[TopicPartition, Errors]]:
    written = await asyncio.gather(*(_write_marker(services, m) for m in markers))
    errors: dict[int, dict[TopicPartition, Errors]] = {}
    for marker, partitions in zip(markers, written):
        errors.setdefault(marker.producer_id, {}).update(partitions)  # Kafka merges markers of one producer
    return errors


@handles(ApiKey.WRITE_TXN_MARKERS, error_response=error_response)
async def handle_write_txn_markers(services: BrokerServices, request: Request) -> Response | None:
    """Answered once every marker is replicated to the ISR (or failed), without holding a handler."""
    markers = list(request.body().markers)
    return respond_later(services, request, _write_markers(services, markers), _response)
