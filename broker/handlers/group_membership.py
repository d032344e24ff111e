"""JoinGroup (v0-9), SyncGroup (v0-5), Heartbeat (v0-4) and LeaveGroup (v0-5) for classic groups."""

from __future__ import annotations

from typing import Any

from broker.coordinator.group.group_metadata import JoinGroupResult, SyncGroupResult
from broker.handlers import handles
from broker.handlers._group_support import client_host, group_coordinator, respond_later
from broker.handlers._share_support import is_share_group
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse


# --- JoinGroup ------------------------------------------------------------------------------------

def _join_response(result: JoinGroupResult, version: int) -> JoinGroupResponse:
    fields: dict[str, Any] = {
        "error_code": int(result.error), "generation_id": result.generation_id, "leader": result.leader_id,
        "member_id": result.member_id,
        # v7+ makes the protocol name nullable; older versions get "" as Kafka answers them.
        "protocol_name": result.protocol_name if version >= 7 else (result.protocol_name or ""),
        "members": [JoinGroupResponse.JoinGroupResponseMember(
            member_id=member_id, metadata=metadata, **({"group_instance_id": instance_id} if version >= 5 else {}))
            for member_id, instance_id, metadata in result.members],
    }
    if version >= 2:
        fields["throttle_time_ms"] = 0
    if version >= 7:
        fields["protocol_type"] = result.protocol_type
    if version >= 9:
        fields["skip_assignment"] = result.skip_assignment
    return JoinGroupResponse(**fields)


def join_error_response(request: Request, error: Errors) -> JoinGroupResponse:
    return _join_response(JoinGroupResult("", error), request.api_version)


@handles(ApiKey.JOIN_GROUP, error_response=join_error_response)
async def handle_join_group(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    if is_share_group(services, body.group_id):  # KIP-932: the id belongs to a share group
        return Response.send(request, join_error_response(request, Errors.INCONSISTENT_GROUP_PROTOCOL))
    coordinator = group_coordinator(services)
    future = coordinator.join_group(
        body.group_id, body.member_id, body.group_instance_id if version >= 5 else None,
        require_known_member_id=version >= 4, support_skip_assignment=version >= 9,
        client_id=request.header.client_id or "", client_host=client_host(request),
        rebalance_timeout_ms=body.session_timeout_ms if version == 0 else body.rebalance_timeout_ms,
        session_timeout_ms=body.session_timeout_ms, protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        reason=body.reason if version >= 8 else None)
    return respond_later(services, request, future, lambda result: _join_response(result, version))


# --- SyncGroup ------------------------------------------------------------------------------------

def _sync_response(result: SyncGroupResult, version: int) -> SyncGroupResponse:
    fields: dict[str, Any] = {"error_code": int(result.error), "assignment": result.assignment}
    if version >= 1:
        fields["throttle_time_ms"] = 0
    if version >= 5:
        fields.update(protocol_type=result.protocol_type, protocol_name=result.protocol_name)
    return SyncGroupResponse(**fields)


def sync_error_response(request: Request, error: Errors) -> SyncGroupResponse:
    return _sync_response(SyncGroupResult(error), request.api_version)


@handles(ApiKey.SYNC_GROUP, error_response=sync_error_response)
async def handle_sync_group(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    coordinator = group_coordinator(services)
    protocol_type = body.protocol_type if version >= 5 else None
    protocol_name = body.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        return Response.send(request, sync_error_response(request, Errors.INCONSISTENT_GROUP_PROTOCOL))
    future = coordinator.sync_group(
        body.group_id, body.generation_id, body.member_id, protocol_type, protocol_name,
        body.group_instance_id if version >= 3 else None,
        {a.member_id: bytes(a.assignment) for a in body.assignments})
    return respond_later(services, request, future, lambda result: _sync_response(result, version))


# --- Heartbeat ------------------------------------------------------------------------------------

def heartbeat_error_response(request: Request, error: Errors) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=int(error), **({"throttle_time_ms": 0} if request.api_version >= 1 else {}))


@handles(ApiKey.HEARTBEAT, error_response=heartbeat_error_response)
async def handle_heartbeat(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    error = group_coordinator(services).heartbeat(
        body.group_id, body.member_id, body.group_instance_id if request.api_version >= 3 else None,
        body.generation_id)
    return Response.send(request, heartbeat_error_response(request, error))


# --- LeaveGroup -----------------------------------------------------------------------------------

def _leaving(request: Request) -> list[tuple[str, str | None]]:
    body = request.body()
    if request.api_version >= 3:
        return [(m.member_id, m.group_instance_id) for m in body.members]
    return [(body.member_id, None)]


def _leave_response(request: Request, error: Errors, member_errors: list[Errors]) -> LeaveGroupResponse:
    version = request.api_version
    fields: dict[str, Any] = {"throttle_time_ms": 0} if version >= 1 else {}
    if version >= 3:
        fields["members"] = [LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=int(e))
                             for (m, i), e in zip(_leaving(request), member_errors)]
    elif error is Errors.NONE:  # one member: its error is the request's
        error = next((e for e in member_errors if e is not Errors.NONE), Errors.NONE)
    return LeaveGroupResponse(error_code=int(error), **fields)


def leave_error_response(request: Request, error: Errors) -> LeaveGroupResponse:
    return _leave_response(request, error, [])


@handles(ApiKey.LEAVE_GROUP, error_response=leave_error_response)
async def handle_leave_group(services: BrokerServices, request: Request) -> Response:
    error, member_errors = group_coordinator(services).leave_group(request.body().group_id, _leaving(request))
    return Response.send(request, _leave_response(request, error, member_errors))
