"""DeleteShareGroupState (v0): forget share-partitions' state (their records become tombstones)."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import per_partition, state_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, error_message
from protocol.messages import DeleteShareGroupStateResponse

R = DeleteShareGroupStateResponse


def _result(partition: int, error: Errors, message: str | None = None) -> Any:
    return R.PartitionResult(partition=partition, error_code=int(error),
                             error_message=(message or error_message(error)) if error else None)


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
async def handle_delete_share_group_state(services: BrokerServices, request: Request) -> Response:
    coordinator = state_coordinator(services, request)

    async def delete(key: Any, _data: Any) -> Any:
        return _result(key[2], await coordinator.delete(key))

    results = await per_partition(request.body(), delete, lambda p, e: _result(p, e.error, e.message))
    return Response.send(request, R(results=[R.DeleteStateResult(topic_id=topic_id, partitions=partitions)
                                             for topic_id, partitions in results]))
