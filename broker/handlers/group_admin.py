"""DescribeGroups (v0-6), ListGroups (v0-5) and DeleteGroups (v0-2).

DescribeGroups describes classic groups only, as Kafka 4.2: a KIP-848 consumer group (described by
ConsumerGroupDescribe) and an unknown group are GROUP_ID_NOT_FOUND from v6 (KIP-1043) and a Dead
group without members below it, which is what Kafka 3.9's tools then show."""

from __future__ import annotations

from typing import Any

from broker.coordinator.group.group_metadata import GroupState
from broker.coordinator.group.group_operations import delete_groups, describe_group, list_groups
from broker.handlers import handles
from broker.handlers._group_support import group_coordinator
from broker.handlers._share_support import SHARE_GROUP_TYPE, delete_share_groups, listed_share_groups
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse

D = DescribeGroupsResponse


def _failed_group(group_id: str, error: Errors, message: str | None = None, state: str = "") -> Any:
    return D.DescribedGroup(error_code=int(error), error_message=message, group_id=group_id, group_state=state,
                            protocol_type="", protocol_data="", members=[])


def _not_found(group_id: str, message: str, version: int) -> Any:
    if version >= 6:
        return _failed_group(group_id, Errors.GROUP_ID_NOT_FOUND, message)
    return _failed_group(group_id, Errors.NONE, state=GroupState.DEAD.value)


def describe_error_response(request: Request, error: Errors) -> D:
    fields: dict[str, Any] = {"throttle_time_ms": 0} if request.api_version >= 1 else {}
    return D(groups=[_failed_group(g, error) for g in request.body().groups], **fields)


@handles(ApiKey.DESCRIBE_GROUPS, error_response=describe_error_response)
async def handle_describe_groups(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    coordinator = group_coordinator(services)
    groups = []
    auth = services.auth
    for group_id in body.groups:
        if not auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_failed_group(group_id, Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        error, summary = describe_group(coordinator, group_id)
        entry = coordinator.manager.get_group(group_id)
        if error is Errors.NONE and entry is not None and entry.consumer_group is not None:
            groups.append(_not_found(group_id, f"Group {group_id} is not a classic group.", version))
            continue
        if error is Errors.NONE and entry is None and version >= 6:
            groups.append(_not_found(group_id, f"Group {group_id} not found.", version))
            continue
        described = D.DescribedGroup(
            error_code=int(error), group_id=group_id, group_state=summary.state,
            protocol_type=summary.protocol_type, protocol_data=summary.protocol,
            members=[D.DescribedGroupMember(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata, member_assignment=m.assignment,
                **({"group_instance_id": m.group_instance_id} if version >= 4 else {}))
                for m in summary.members])
        if version >= 3 and body.include_authorized_operations and error == Errors.NONE:
            described.authorized_operations = auth.authorized_operations(request, ResourceType.GROUP, group_id)
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
    if types:
        groups = [g for g in groups if g.group_type in types]
    auth = services.auth
    if not auth.authorize_cluster(request, AclOperation.DESCRIBE, log_if_denied=False):
        # Without DESCRIBE on the cluster, only the groups the request may DESCRIBE (as Kafka).
        described = auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.GROUP, groups,
                                           lambda g: g.group_id, log_if_denied=False)
        groups = [g for g in groups if g.group_id in described]
    listed = []
    for group in groups:
        fields: dict[str, Any] = {"group_state": group.state_name} if version >= 4 else {}
        if version >= 5:
            fields["group_type"] = group.group_type
        protocol_type = "consumer" if group.consumer_group is not None else group.protocol_type or ""
        listed.append(ListGroupsResponse.ListedGroup(group_id=group.group_id, protocol_type=protocol_type, **fields))
    for group_id, state in listed_share_groups(services, states, types):  # share groups (KIP-932)
        if auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id, log_if_denied=False):
            fields = {"group_state": state, "group_type": SHARE_GROUP_TYPE} if version >= 5 else \
                ({"group_state": state} if version >= 4 else {})
            listed.append(ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=SHARE_GROUP_TYPE, **fields))
    extra: dict[str, Any] = {"throttle_time_ms": 0} if version >= 1 else {}
    return Response.send(request, ListGroupsResponse(error_code=int(error), groups=listed, **extra))


def delete_error_response(request: Request, error: Errors) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(error))
        for g in request.body().groups_names])


@handles(ApiKey.DELETE_GROUPS, error_response=delete_error_response)
async def handle_delete_groups(services: BrokerServices, request: Request) -> Response:
    names = list(request.body().groups_names)
    deletable = services.auth.filter_authorized(request, AclOperation.DELETE, ResourceType.GROUP, names)
    share_groups = await delete_share_groups(services, [g for g in names if g in deletable])  # KIP-932
    errors = {**delete_groups(group_coordinator(services), [g for g in names if g in deletable and g not in share_groups]),
              **share_groups,
              **{g: Errors.GROUP_AUTHORIZATION_FAILED for g in names if g not in deletable}}
    return Response.send(request, DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(errors[g])) for g in names]))
