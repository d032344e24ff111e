"""WriteShareGroupState (v0-1): a share-partition leader stores its state with the share coordinator."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import per_partition, state_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import WriteShareGroupStateResponse
from protocol.share_group_state_records import PersistedBatch

R = WriteShareGroupStateResponse


def _result(partition: int, error: Errors, message: str | None = None) -> Any:
    return R.PartitionResult(partition=partition, error_code=int(error),
                             error_message=(message or error_message(error)) if error else None)


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
async def handle_write_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def write(key: Any, data: Any) -> Any:
        return _result(data.partition, await coordinator.write(
            key, data.state_epoch, data.leader_epoch, data.start_offset,
            [PersistedBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
             for b in data.state_batches]))

    results = await per_partition(request.body(), write, lambda p, e: _result(p, e.error, e.message))
    return Response.send(request, R(results=[R.WriteStateResult(topic_id=topic_id, partitions=partitions)
                                             for topic_id, partitions in results]))
