"""OffsetDelete (v0): remove a group's committed offsets for partitions it no longer consumes."""

from __future__ import annotations

from typing import Any

from broker.coordinator.group.group_operations import delete_offsets
from broker.handlers import handles
from broker.handlers._group_support import group_coordinator
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import OffsetDeleteResponse

R = OffsetDeleteResponse


def error_response(request: Request, error: Errors) -> R:
    return R(error_code=int(error), throttle_time_ms=0, topics=[])


@handles(ApiKey.OFFSET_DELETE, error_response=error_response)
async def handle_offset_delete(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    coordinator = group_coordinator(services)
    errors: dict[tuple[str, int], Errors] = {}
    known = []
    readable = services.auth.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, body.topics,
                                               lambda t: t.name)
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif services.metadata_cache.partition(*tp) is None:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    group_error, deleted = delete_offsets(coordinator, body.group_id, known)
    if group_error is not Errors.NONE:
        return Response.send(request, error_response(request, group_error))
    errors.update(deleted)
    topics: dict[str, list[Any]] = {}
    for (topic, partition), error in errors.items():
        topics.setdefault(topic, []).append(R.OffsetDeleteResponsePartition(partition_index=partition,
                                                                           error_code=int(error)))
    return Response.send(request, R(error_code=0, throttle_time_ms=0, topics=[
        R.OffsetDeleteResponseTopic(name=name, partitions=parts) for name, parts in topics.items()]))
