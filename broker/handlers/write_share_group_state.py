"""WriteShareGroupState (v0-1): a share-partition leader stores its state with the share coordinator."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_rpc, state_coordinator, state_result
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.messages import WriteShareGroupStateResponse as R
from protocol.share_group_state_records import PersistedBatch


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
async def handle_write_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def write(key: Any, data: Any) -> Any:
        batches = [PersistedBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in data.state_batches]
        error = await coordinator.write(key, data.state_epoch, data.leader_epoch, data.start_offset, batches)
        return state_result(R, data.partition, error)

    return await answer_state_rpc(request, R, "WriteStateResult", write)
