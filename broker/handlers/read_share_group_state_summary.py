"""ReadShareGroupStateSummary (v0-1): the start offset and epochs of share-partitions (for
DescribeShareGroupOffsets), without their state batches."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import per_partition, state_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, error_message
from protocol.messages import ReadShareGroupStateSummaryResponse

R = ReadShareGroupStateSummaryResponse


def _failed(partition: int, error: Errors, message: str | None = None) -> Any:
    return R.PartitionResult(partition=partition, error_code=int(error), error_message=message or error_message(error),
                             state_epoch=0, leader_epoch=-1, start_offset=-1)


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)
async def handle_read_share_group_state_summary(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def summary(key: Any, data: Any) -> Any:
        state = coordinator.read(key)
        if state is None:
            return _failed(data.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        return R.PartitionResult(partition=data.partition, error_code=0, state_epoch=state.state_epoch,
                                 leader_epoch=state.leader_epoch, start_offset=state.start_offset)

    results = await per_partition(request.body(), summary, lambda p, e: _failed(p, e.error, e.message))
    return Response.send(request, R(results=[R.ReadStateSummaryResult(topic_id=topic_id, partitions=partitions)
                                             for topic_id, partitions in results]))
