"""LeaderAndIsr, UpdateMetadata and StopReplica: the controller's requests to every broker.

Each is fenced by the controller epoch first (a deposed controller gets
STALE_CONTROLLER_EPOCH), then applied to the replica manager or the metadata cache.
"""

from __future__ import annotations

import logging

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import LeaderAndIsrResponse, UpdateMetadataResponse

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


@handles(ApiKey.LEADER_AND_ISR, error_response=leader_and_isr_error_response)
async def handle_leader_and_isr(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    services.epoch_fence.check_and_update(body.controller_id, body.controller_epoch)
    response = await services.replica_manager.become_leader_or_follower(
        body, request.api_version, services.config_repository.topic_config)
    return Response.send(request, response)


@handles(ApiKey.UPDATE_METADATA)
async def handle_update_metadata(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    services.epoch_fence.check_and_update(body.controller_id, body.controller_epoch)
    if body.broker_epoch != -1 and body.broker_epoch < services.broker_epoch:
        return Response.send(request, UpdateMetadataResponse(error_code=int(Errors.STALE_BROKER_EPOCH)))
    deleted = services.metadata_cache.update_metadata(body)
    for tp in deleted:
        services.replica_manager.complete_delayed_requests(tp)
    return Response.send(request, UpdateMetadataResponse(error_code=0))


@handles(ApiKey.STOP_REPLICA)
async def handle_stop_replica(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    services.epoch_fence.check_and_update(body.controller_id, body.controller_epoch)
    return Response.send(request, await services.replica_manager.stop_replicas(body))
