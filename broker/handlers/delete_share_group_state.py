"""DeleteShareGroupState (v0): forget share-partitions' state (their records become tombstones)."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_rpc, state_coordinator, state_result
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.messages import DeleteShareGroupStateResponse as R


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
async def handle_delete_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def delete(key: Any, data: Any) -> Any:
        return state_result(R, data.partition, await coordinator.delete(key))

    return await answer_state_rpc(request, R, "DeleteStateResult", delete)
