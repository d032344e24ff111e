"""InitProducerId, DescribeProducers, and AllocateProducerIds.

InitProducerId goes to the transaction coordinator: a transactional id's coordinator bumps its
epoch (fencing older producers); without one, any broker hands out a new producer id from the
ProducerIdManager blocks claimed in ZooKeeper.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.coordinator.transaction.transaction_coordinator import InitProducerIdResult
from broker.coordinator.transaction.transaction_metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from broker.errors import error_of
from broker.handlers import handles
from broker.handlers._group_support import respond_later
from broker.handlers._transaction_support import for_client_version, transaction_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import AllocateProducerIdsResponse, DescribeProducersResponse, InitProducerIdResponse
from storage.errors import StorageError

log = logging.getLogger(__name__)

FIRST_FENCED_VERSION = 4  # InitProducerId v4 knows PRODUCER_FENCED


def _init_producer_id_response(version: int, result: InitProducerIdResult) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch,
                                  error_code=int(for_client_version(result.error, version, FIRST_FENCED_VERSION)))


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    producer_id, epoch = (body.producer_id, body.producer_epoch) if version >= 3 else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):  # a KIP-360 retry names both or neither
        return Response.send(request, _init_producer_id_response(version, InitProducerIdResult(Errors.INVALID_REQUEST)))
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, epoch)
    result = transaction_coordinator(services).handle_init_producer_id(
        body.transactional_id, body.transaction_timeout_ms, expected)
    return respond_later(services, request, result, lambda done: _init_producer_id_response(version, done))


def _describe_partition(services: BrokerServices, topic: str, index: int) -> Any:
    entry = DescribeProducersResponse.PartitionResponse(partition_index=index, error_code=0, active_producers=[])
    try:
        tp_log = services.replica_manager.leader_partition(topic, index).leader_log()
    except (KafkaApiError, StorageError) as exc:
        error = error_of(exc)
        assert error is not None
        entry.error_code = int(error)
        entry.error_message = str(exc)
        return entry
    for state in tp_log.active_producers():
        entry.active_producers.append(DescribeProducersResponse.ProducerState(
            producer_id=state.producer_id, producer_epoch=state.producer_epoch,
            last_sequence=state.last_seq if not state.is_empty else -1,
            last_timestamp=state.last_timestamp, coordinator_epoch=state.coordinator_epoch,
            current_txn_start_offset=state.current_txn_first_offset
            if state.current_txn_first_offset is not None else -1,
        ))
    return entry


@handles(ApiKey.DESCRIBE_PRODUCERS)
async def handle_describe_producers(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    return Response.send(request, DescribeProducersResponse(throttle_time_ms=0, topics=[
        DescribeProducersResponse.TopicResponse(name=t.name, partitions=[
            _describe_partition(services, t.name, index) for index in t.partition_indexes])
        for t in body.topics]))


@handles(ApiKey.ALLOCATE_PRODUCER_IDS)
async def handle_allocate_producer_ids(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    block = await services.pool.run_blocking(services.controller.allocate_producer_ids, body.broker_id,
                                             body.broker_epoch)
    return Response.send(request, AllocateProducerIdsResponse(
        throttle_time_ms=0, error_code=0, producer_id_start=block.first_producer_id,
        producer_id_len=block.size))
