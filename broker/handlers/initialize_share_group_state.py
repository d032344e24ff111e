"""InitializeShareGroupState (v0): set a share-partition's start offset and state epoch afresh."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_rpc, state_coordinator, state_result
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.messages import InitializeShareGroupStateResponse as R


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
async def handle_initialize_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def initialize(key: Any, data: Any) -> Any:
        return state_result(R, data.partition, await coordinator.initialize(key, data.state_epoch, data.start_offset))

    return await answer_state_rpc(request, R, "InitializeStateResult", initialize)
