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
from protocol.messages import UpdateMetadataResponse

log = logging.getLogger(__name__)


@handles(ApiKey.LEADER_AND_ISR)
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
