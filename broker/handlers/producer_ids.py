"""InitProducerId (idempotent producers), DescribeProducers, and AllocateProducerIds.

Producer ids come from ProducerIdManager blocks claimed in ZooKeeper. Transactional ids need
the transaction coordinator, which this broker does not run yet: they get
COORDINATOR_NOT_AVAILABLE, which clients treat as retriable.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.handlers import handles
from broker.errors import error_of
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import AllocateProducerIdsResponse, DescribeProducersResponse, InitProducerIdResponse
from storage.errors import StorageError

log = logging.getLogger(__name__)


def init_producer_id_denied(services: BrokerServices, request: Request, transactional_id: str | None
                            ) -> Errors | None:
    """WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster or (KIP-679) WRITE
    on some topic (Kafka's handleInitProducerIdRequest)."""
    auth = services.auth
    if transactional_id is not None:
        if not auth.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not (auth.authorize_cluster(request, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
              or auth.authorize_by_resource_type(request, AclOperation.WRITE, ResourceType.TOPIC)):
        return Errors.CLUSTER_AUTHORIZATION_FAILED
    return None


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    denied = init_producer_id_denied(services, request, body.transactional_id)
    if denied is not None:
        return Response.send(request, InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(denied), producer_id=-1, producer_epoch=-1))
    if body.transactional_id is not None:
        return Response.send(request, InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(Errors.COORDINATOR_NOT_AVAILABLE), producer_id=-1, producer_epoch=-1))
    producer_id = await services.pool.run_blocking(services.producer_id_manager.generate_producer_id)
    return Response.send(request, InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0))


def _describe_partition(services: BrokerServices, topic: str, index: int, readable: set[str]) -> Any:
    entry = DescribeProducersResponse.PartitionResponse(partition_index=index, error_code=0, active_producers=[])
    try:
        if topic not in readable:
            raise KafkaApiError(Errors.TOPIC_AUTHORIZATION_FAILED)
        tp_log = services.replica_manager.leader_partition(topic, index).leader_log()
    except (KafkaApiError, StorageError) as exc:
        error = error_of(exc)
        assert error is not None
        entry.error_code = int(error)
        entry.error_message = str(exc)
        return entry
    for producer_id, state in sorted(tp_log.producers.producers.items()):
        entry.active_producers.append(DescribeProducersResponse.ProducerState(
            producer_id=producer_id, producer_epoch=state.producer_epoch,
            last_sequence=state.last_seq if not state.is_empty else -1,
            last_timestamp=state.last_timestamp, coordinator_epoch=state.coordinator_epoch,
            current_txn_start_offset=state.current_txn_first_offset
            if state.current_txn_first_offset is not None else -1,
        ))
    return entry


@handles(ApiKey.DESCRIBE_PRODUCERS)
async def handle_describe_producers(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    readable = services.auth.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, body.topics,
                                               lambda t: t.name)
    return Response.send(request, DescribeProducersResponse(throttle_time_ms=0, topics=[
        DescribeProducersResponse.TopicResponse(name=t.name, partitions=[
            _describe_partition(services, t.name, index, readable) for index in t.partition_indexes])
        for t in body.topics]))


@handles(ApiKey.ALLOCATE_PRODUCER_IDS)
async def handle_allocate_producer_ids(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    block = await services.pool.run_blocking(services.controller.allocate_producer_ids, body.broker_id,
                                             body.broker_epoch)
    return Response.send(request, AllocateProducerIdsResponse(
        throttle_time_ms=0, error_code=0, producer_id_start=block.first_producer_id,
        producer_id_len=block.size))
