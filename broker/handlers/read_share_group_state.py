"""ReadShareGroupState (v0): a new share-partition leader reads its state from the share coordinator
(UNKNOWN_TOPIC_OR_PARTITION when nothing was ever stored, as Kafka)."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import per_partition, state_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, error_message
from protocol.messages import ReadShareGroupStateResponse

R = ReadShareGroupStateResponse


def _failed(partition: int, error: Errors, message: str | None = None) -> Any:
    return R.PartitionResult(partition=partition, error_code=int(error), error_message=message or error_message(error),
                             state_epoch=0, start_offset=-1)


@handles(ApiKey.READ_SHARE_GROUP_STATE)
async def handle_read_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def read(key: Any, data: Any) -> Any:
        state = coordinator.read(key)
        if state is None:
            return _failed(data.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        return R.PartitionResult(partition=data.partition, error_code=0, state_epoch=state.state_epoch,
                                 start_offset=state.start_offset, state_batches=[
                                     R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                  delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                     for b in state.state_batches])

    results = await per_partition(request.body(), read, lambda p, e: _failed(p, e.error, e.message))
    return Response.send(request, R(results=[R.ReadStateResult(topic_id=topic_id, partitions=partitions)
                                             for topic_id, partitions in results]))
