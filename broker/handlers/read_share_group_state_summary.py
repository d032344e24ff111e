"""ReadShareGroupStateSummary (v0-1): the start offset and epochs of share-partitions (what
DescribeShareGroupOffsets shows), without their state batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_read
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.messages import ReadShareGroupStateSummaryResponse as R

if TYPE_CHECKING:
    from broker.share.share_coordinator_shard import ShareGroupOffset


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)
async def handle_read_share_group_state_summary(services: BrokerServices, request: Request) -> Response:
    return await answer_state_read(services, request, R, "ReadStateSummaryResult",
                                   {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1}, _summary)


def _summary(state: ShareGroupOffset) -> dict[str, Any]:
    return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch, "start_offset": state.start_offset}
