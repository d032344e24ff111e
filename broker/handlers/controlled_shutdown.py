"""ControlledShutdown (controller side): move leadership off a broker that is stopping.

CLUSTER_ACTION is checked before the handler; a broker that is not the controller answers
STALE_CONTROLLER_EPOCH (Kafka's "controller moved"), then the broker epoch is checked (an older one
is STALE_BROKER_EPOCH; -1, from a broker before KIP-380, passes), then the broker must be live.
"""

from __future__ import annotations

import asyncio

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.errors import NotControllerError
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ControlledShutdownResponse


@handles(ApiKey.CONTROLLED_SHUTDOWN)
async def handle_controlled_shutdown(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    try:
        services.controller.require_active()
        remaining = await asyncio.wrap_future(services.controller.controlled_shutdown(body.broker_id,
                                                                                      body.broker_epoch))
    except NotControllerError:
        # Kafka's controller throws ControllerMovedException here, whose code is STALE_CONTROLLER_EPOCH
        return Response.send(request, ControlledShutdownResponse(error_code=int(Errors.STALE_CONTROLLER_EPOCH),
                                                                 remaining_partitions=[]))
    return Response.send(request, ControlledShutdownResponse(
        error_code=0,
        remaining_partitions=[
            ControlledShutdownResponse.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
            for tp in sorted(remaining)
        ],
    ))
