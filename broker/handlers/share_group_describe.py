"""ShareGroupDescribe (v1): share groups with their epochs, members and assignments."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._group_support import group_coordinator
from broker.handlers._share_support import share_services
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ShareGroupDescribeResponse

R = ShareGroupDescribeResponse
SIMPLE_ASSIGNOR = "simple"


def _failed(group_id: str, error: Errors, message: str | None = None) -> Any:
    return R.DescribedGroup(error_code=int(error), error_message=message, group_id=group_id, group_state="",
                            assignor_name="", members=[])


def _error_response(request: Request, error: Errors) -> R:
    return R(throttle_time_ms=0, groups=[_failed(g, error) for g in request.body().group_ids])


@handles(ApiKey.SHARE_GROUP_DESCRIBE, error_response=_error_response)
async def handle_share_group_describe(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    share = share_services(services)
    coordinator = group_coordinator(services)
    cache = services.metadata_cache
    groups = []
    for group_id in body.group_ids:
        if not services.auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_failed(group_id, Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        status = coordinator.validate_group_status(group_id)
        if status is not None:
            groups.append(_failed(group_id, status))
            continue
        group = share.coordinator.groups.get(group_id)
        if group is None:
            groups.append(_failed(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
            continue
        members = [R.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
            assignment=R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=topic_id, topic_name=cache.topic_name(topic_id) or "",
                                  partitions=sorted(partitions))
                for topic_id, partitions in sorted(m.assignment.items())]))
            for m in group.members.values()]
        described = R.DescribedGroup(
            error_code=0, group_id=group_id, group_state=group.state.value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=SIMPLE_ASSIGNOR, members=members)
        if body.include_authorized_operations:
            described.authorized_operations = services.auth.authorized_operations(request, ResourceType.GROUP,
                                                                                  group_id)
        groups.append(described)
    return Response.send(request, R(throttle_time_ms=0, groups=groups))
