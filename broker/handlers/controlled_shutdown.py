"""ControlledShutdown (controller side): move leadership off a broker that is stopping."""

from __future__ import annotations

import asyncio

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.messages import ControlledShutdownResponse


@handles(ApiKey.CONTROLLED_SHUTDOWN)
async def handle_controlled_shutdown(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    services.controller.require_active()
    remaining = await asyncio.wrap_future(services.controller.controlled_shutdown(body.broker_id, body.broker_epoch))
    return Response.send(request, ControlledShutdownResponse(
        error_code=0,
        remaining_partitions=[
            ControlledShutdownResponse.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
            for tp in sorted(remaining)
        ],
    ))
