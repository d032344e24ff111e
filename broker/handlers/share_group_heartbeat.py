"""ShareGroupHeartbeat (v1): join, stay in or leave a share group; the coordinator answers with
the member epoch, the heartbeat interval and the member's assignment when it changed."""

from __future__ import annotations

from broker.handlers import handles
from broker.handlers._group_support import client_host, group_coordinator
from broker.handlers._share_support import share_services
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from broker.share.share_partition_manager import now_ms
from protocol.api_keys import ApiKey
from protocol.errors import Errors, error_message
from protocol.messages import ShareGroupHeartbeatResponse

R = ShareGroupHeartbeatResponse


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
async def handle_share_group_heartbeat(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    share = share_services(services)
    if not services.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _error(request, Errors.GROUP_AUTHORIZATION_FAILED)
    status = group_coordinator(services).validate_group_status(body.group_id)
    if status is not None:
        return _error(request, status)
    result = await share.coordinator.heartbeat(
        body.group_id, body.member_id, body.member_epoch, body.rack_id,
        None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
        request.header.client_id or "", client_host(request), now_ms())
    if result.error is not Errors.NONE:  # a failed write has no message, as Kafka's coordinator answers it
        return Response.send(request, R(throttle_time_ms=0, error_code=int(result.error), error_message=result.message))
    assignment = None if result.assignment is None else R.Assignment(topic_partitions=[
        R.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(result.assignment.items())])
    return Response.send(request, R(
        throttle_time_ms=0, error_code=0, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=share.coordinator.heartbeat_interval_ms(body.group_id), assignment=assignment))


def _error(request: Request, error: Errors) -> Response:
    return Response.send(request, R(throttle_time_ms=0, error_code=int(error), error_message=error_message(error)))
