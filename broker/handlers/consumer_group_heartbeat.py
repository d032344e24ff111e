"""ConsumerGroupHeartbeat (v0-1): joining, staying in and leaving a KIP-848 consumer group."""

from __future__ import annotations

from typing import Any

from broker.coordinator.consumer.consumer_group_coordinator import ConsumerGroupCoordinator, HeartbeatRequest
from broker.handlers import handles
from broker.handlers._group_support import client_host
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import ConsumerGroupHeartbeatResponse

R = ConsumerGroupHeartbeatResponse


def consumer_group_coordinator(services: BrokerServices) -> ConsumerGroupCoordinator:
    coordinator = services.consumer_group_coordinator
    if coordinator is None:
        raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE)
    return coordinator


def heartbeat_error_response(request: Request, error: Errors, message: str | None = None) -> R:
    return R(throttle_time_ms=0, error_code=int(error), error_message=message or error_message(error),
             member_epoch=-1, heartbeat_interval_ms=0)


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, error_response=heartbeat_error_response)
async def handle_consumer_group_heartbeat(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    coordinator = consumer_group_coordinator(services)
    owned = None if body.topic_partitions is None else {
        t.topic_id: frozenset(t.partitions) for t in body.topic_partitions if t.partitions}
    regex = body.subscribed_topic_regex if version >= 1 else None
    if body.subscribed_topic_names:
        # Kafka 4.2: names the member may not DESCRIBE fail the heartbeat, and change nothing.
        denied = sorted(set(body.subscribed_topic_names) - services.auth.filter_authorized(
            request, AclOperation.DESCRIBE, ResourceType.TOPIC, list(body.subscribed_topic_names)))
        if denied:
            return Response.send(request, heartbeat_error_response(
                request, Errors.TOPIC_AUTHORIZATION_FAILED, f"Unauthorized topics {denied}"))
    try:
        result = await coordinator.heartbeat(HeartbeatRequest(
            group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
            instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=body.rebalance_timeout_ms,
            subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
            subscribed_topic_regex=regex, server_assignor=body.server_assignor, owned=owned,
            client_id=request.header.client_id or "", client_host=client_host(request), version=version))
    except KafkaApiError as exc:
        return Response.send(request, heartbeat_error_response(request, exc.error, exc.message))
    assignment: Any = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(result.assignment.items(), key=lambda item: str(item[0]))])
    return Response.send(request, R(throttle_time_ms=0, error_code=0, member_id=result.member_id,
                                    member_epoch=result.member_epoch,
                                    heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment))
