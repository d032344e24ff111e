"""ReadShareGroupState (v0): a new share-partition leader reads its state from the share coordinator
(UNKNOWN_TOPIC_OR_PARTITION when nothing was ever stored, as Kafka)."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_rpc, state_coordinator, state_result
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ReadShareGroupStateResponse as R

UNKNOWN = {"state_epoch": 0, "start_offset": -1}


@handles(ApiKey.READ_SHARE_GROUP_STATE)
async def handle_read_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def read(key: Any, data: Any) -> Any:
        state = coordinator.read(key)
        if state is None:
            return state_result(R, data.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION, **UNKNOWN)
        return state_result(R, data.partition, Errors.NONE, state_epoch=state.state_epoch,
                            start_offset=state.start_offset, state_batches=[
                                R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                for b in state.state_batches])

    return await answer_state_rpc(request, R, "ReadStateResult", read, **UNKNOWN)
