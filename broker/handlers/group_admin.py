"""DescribeGroups (v0-5), ListGroups (v0-5) and DeleteGroups (v0-2) for classic groups."""

from __future__ import annotations

from typing import Any

from broker.auth_helper import ResourceType, authorized_operations
from broker.coordinator.group.group_operations import delete_groups, describe_group, list_groups
from broker.handlers import handles
from broker.handlers._group_support import group_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse

CLASSIC_GROUP_TYPE = "classic"
D = DescribeGroupsResponse


def describe_error_response(request: Request, error: Errors) -> D:
    fields: dict[str, Any] = {"throttle_time_ms": 0} if request.api_version >= 1 else {}
    return D(groups=[D.DescribedGroup(error_code=int(error), group_id=g, group_state="", protocol_type="",
                                      protocol_data="", members=[]) for g in request.body().groups], **fields)


@handles(ApiKey.DESCRIBE_GROUPS, error_response=describe_error_response)
async def handle_describe_groups(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    coordinator = group_coordinator(services)
    groups = []
    for group_id in body.groups:
        error, summary = describe_group(coordinator, group_id)
        described = D.DescribedGroup(
            error_code=int(error), group_id=group_id, group_state=summary.state,
            protocol_type=summary.protocol_type, protocol_data=summary.protocol,
            members=[D.DescribedGroupMember(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata, member_assignment=m.assignment,
                **({"group_instance_id": m.group_instance_id} if version >= 4 else {}))
                for m in summary.members])
        if version >= 3 and body.include_authorized_operations and error == Errors.NONE:
            described.authorized_operations = authorized_operations(request, ResourceType.GROUP, group_id)
        groups.append(described)
    fields: dict[str, Any] = {"throttle_time_ms": 0} if version >= 1 else {}
    return Response.send(request, D(groups=groups, **fields))


@handles(ApiKey.LIST_GROUPS)
async def handle_list_groups(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    states = list(body.states_filter) if version >= 4 else []
    types = {t.lower() for t in body.types_filter} if version >= 5 else set()
    error, groups = list_groups(group_coordinator(services), states)
    if types and CLASSIC_GROUP_TYPE not in types:
        groups = []
    listed = []
    for group in groups:
        fields: dict[str, Any] = {"group_state": group.state.value} if version >= 4 else {}
        if version >= 5:
            fields["group_type"] = CLASSIC_GROUP_TYPE
        listed.append(ListGroupsResponse.ListedGroup(group_id=group.group_id,
                                                     protocol_type=group.protocol_type or "", **fields))
    extra: dict[str, Any] = {"throttle_time_ms": 0} if version >= 1 else {}
    return Response.send(request, ListGroupsResponse(error_code=int(error), groups=listed, **extra))


def delete_error_response(request: Request, error: Errors) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(error))
        for g in request.body().groups_names])


@handles(ApiKey.DELETE_GROUPS, error_response=delete_error_response)
async def handle_delete_groups(services: BrokerServices, request: Request) -> Response:
    names = list(request.body().groups_names)
    errors = delete_groups(group_coordinator(services), names)
    return Response.send(request, DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(errors[g])) for g in names]))
