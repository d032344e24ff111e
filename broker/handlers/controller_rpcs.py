"""LeaderAndIsr, UpdateMetadata and StopReplica: the controller's requests to every broker.

Each is fenced as Kafka fences it, in its order: CLUSTER_ACTION (before the handler), then the
broker epoch (a request meant for this broker's previous incarnation gets STALE_BROKER_EPOCH and
changes nothing, not even the controller epoch known here), then the controller epoch (a deposed
controller gets STALE_CONTROLLER_EPOCH); only then is it applied to the replica manager or the
metadata cache.
"""

from __future__ import annotations

import logging

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.controller_epoch import StaleControllerEpochError
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import LeaderAndIsrResponse, StopReplicaResponse, UpdateMetadataResponse

log = logging.getLogger(__name__)


def leader_and_isr_error_response(request: Request, error: Errors) -> LeaderAndIsrResponse:
    """Kafka's LeaderAndIsrRequest.getErrorResponse: the error at the top and on every partition."""
    body = request.body()
    if request.api_version >= 5:
        return LeaderAndIsrResponse(error_code=int(error), topics=[LeaderAndIsrResponse.LeaderAndIsrTopicError(
            topic_id=t.topic_id, partition_errors=[LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                partition_index=p.partition_index, error_code=int(error)) for p in t.partition_states])
            for t in body.topic_states])
    partitions = [(t.topic_name, p.partition_index) for t in body.topic_states for p in t.partition_states]
    partitions += [(p.topic_name, p.partition_index) for p in body.ungrouped_partition_states]
    return LeaderAndIsrResponse(error_code=int(error), partition_errors=[
        LeaderAndIsrResponse.LeaderAndIsrPartitionError(topic_name=topic, partition_index=index, error_code=int(error))
        for topic, index in partitions])


def _stale_broker_epoch(services: BrokerServices, broker_epoch: int) -> bool:
    """Kafka's isBrokerEpochStale: older than this broker's registration; -1 is a controller from
    before KIP-380, and a newer epoch one that learnt of this registration first."""
    return broker_epoch != -1 and broker_epoch < services.broker_epoch


@handles(ApiKey.LEADER_AND_ISR, error_response=leader_and_isr_error_response)
async def handle_leader_and_isr(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    if _stale_broker_epoch(services, body.broker_epoch):
        return Response.send(request, leader_and_isr_error_response(request, Errors.STALE_BROKER_EPOCH))
    services.epoch_fence.check_and_update(body.controller_id, body.controller_epoch)
    response = await services.replica_manager.become_leader_or_follower(
        body, request.api_version, services.config_repository.topic_config)
    return Response.send(request, response)


@handles(ApiKey.UPDATE_METADATA)
async def handle_update_metadata(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    if _stale_broker_epoch(services, body.broker_epoch):
        return Response.send(request, UpdateMetadataResponse(error_code=int(Errors.STALE_BROKER_EPOCH)))
    services.epoch_fence.check_and_update(body.controller_id, body.controller_epoch)
    deleted = services.metadata_cache.update_metadata(body)
    for tp in deleted:
        services.replica_manager.complete_delayed_requests(tp)
    return Response.send(request, UpdateMetadataResponse(error_code=0))


def stop_replica_error_response(request: Request, error: Errors) -> StopReplicaResponse:
    """Kafka's StopReplicaRequest.getErrorResponse: the error at the top and on every partition."""
    body = request.body()
    version = request.api_version
    if version >= 3:
        partitions = [(t.topic_name, p.partition_index) for t in body.topic_states for p in t.partition_states]
    elif version >= 1:
        partitions = [(t.name, index) for t in body.topics for index in t.partition_indexes]
    else:
        partitions = [(p.topic_name, p.partition_index) for p in body.ungrouped_partitions]
    return StopReplicaResponse(error_code=int(error), partition_errors=[
        StopReplicaResponse.StopReplicaPartitionError(topic_name=topic, partition_index=index, error_code=int(error))
        for topic, index in partitions])


@handles(ApiKey.STOP_REPLICA, error_response=stop_replica_error_response)
async def handle_stop_replica(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    if _stale_broker_epoch(services, body.broker_epoch):
        return Response.send(request, StopReplicaResponse(error_code=int(Errors.STALE_BROKER_EPOCH)))
    try:
        services.epoch_fence.check_and_update(body.controller_id, body.controller_epoch)
    except StaleControllerEpochError:  # Kafka's replica manager answers it without the partitions
        return Response.send(request, StopReplicaResponse(error_code=int(Errors.STALE_CONTROLLER_EPOCH)))
    return Response.send(request, await services.replica_manager.stop_replicas(body))
