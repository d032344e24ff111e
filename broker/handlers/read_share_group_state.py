"""ReadShareGroupState (v0): a new share-partition leader reads its state from the share coordinator
(UNKNOWN_TOPIC_OR_PARTITION when nothing was ever stored, as Kafka)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.handlers import handles
from broker.handlers._share_support import answer_state_read
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.messages import ReadShareGroupStateResponse as R

if TYPE_CHECKING:
    from broker.share.share_coordinator_shard import ShareGroupOffset


@handles(ApiKey.READ_SHARE_GROUP_STATE)
async def handle_read_share_group_state(services: BrokerServices, request: Request) -> Response:
    return await answer_state_read(services, request, R, "ReadStateResult", {"state_epoch": 0, "start_offset": -1},
                                   _state)


def _state(state: ShareGroupOffset) -> dict[str, Any]:
    return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": [
        R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                     delivery_count=b.delivery_count) for b in state.state_batches]}
