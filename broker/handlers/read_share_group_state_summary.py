"""ReadShareGroupStateSummary (v0-1): the start offset and epochs of share-partitions (what
DescribeShareGroupOffsets shows), without their state batches."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_rpc, state_coordinator, state_result
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ReadShareGroupStateSummaryResponse as R

UNKNOWN = {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1}


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)
async def handle_read_share_group_state_summary(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def summary(key: Any, data: Any) -> Any:
        state = coordinator.read(key)
        if state is None:
            return state_result(R, data.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION, **UNKNOWN)
        return state_result(R, data.partition, Errors.NONE, state_epoch=state.state_epoch,
                            leader_epoch=state.leader_epoch, start_offset=state.start_offset)

    return await answer_state_rpc(request, R, "ReadStateSummaryResult", summary, **UNKNOWN)
