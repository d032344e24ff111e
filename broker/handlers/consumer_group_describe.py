"""ConsumerGroupDescribe (v0-1): KIP-848 groups with their members, assignments and target assignments."""

from __future__ import annotations

import uuid
from typing import Any

from broker.coordinator.consumer.consumer_group import Assignment, ConsumerGroup
from broker.handlers import handles
from broker.handlers.consumer_group_heartbeat import consumer_group_coordinator
from broker.metadata_cache import MetadataCache
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import ConsumerGroupDescribeResponse

R = ConsumerGroupDescribeResponse
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1  # v1's MemberType


def _failed(group_id: str, error: Errors, message: str | None = None) -> Any:
    return R.DescribedGroup(error_code=int(error), error_message=message or error_message(error), group_id=group_id,
                            group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=[])


def describe_error_response(request: Request, error: Errors) -> R:
    return R(throttle_time_ms=0, groups=[_failed(g, error) for g in request.body().group_ids])


def _assignment(assignment: Assignment, metadata_cache: MetadataCache) -> Any:
    topics = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])):
        name = metadata_cache.topic_name(topic_id)
        if name is not None:
            topics.append(R.TopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(partitions)))
    return R.Assignment(topic_partitions=topics)


def _described(group: ConsumerGroup, assignor: str, metadata_cache: MetadataCache, version: int) -> Any:
    empty: dict[uuid.UUID, frozenset[int]] = {}
    members = []
    for m in group.members.values():
        member_type = CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE
        fields: dict[str, Any] = {"member_type": member_type} if version >= 1 else {}
        members.append(R.Member(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex, assignment=_assignment(m.assigned, metadata_cache),
            target_assignment=_assignment(group.target_assignment.get(m.member_id, empty), metadata_cache),
            **fields))
    return R.DescribedGroup(error_code=0, group_id=group.group_id, group_state=group.state.value,
                            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                            assignor_name=assignor, members=members)


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, error_response=describe_error_response)
async def handle_consumer_group_describe(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    coordinator = consumer_group_coordinator(services)
    auth = services.auth
    groups = []
    for group_id in body.group_ids:
        if not group_id:
            groups.append(_failed(group_id, Errors.INVALID_GROUP_ID))
            continue
        if not auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_failed(group_id, Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            group = coordinator.describe(group_id)
        except KafkaApiError as exc:
            groups.append(_failed(group_id, exc.error, exc.message))
            continue
        assignor = group.preferred_assignor(next(iter(coordinator.assignors)))
        described = _described(group, assignor, services.metadata_cache, request.api_version)
        if body.include_authorized_operations:
            described.authorized_operations = auth.authorized_operations(request, ResourceType.GROUP, group_id)
        groups.append(described)
    return Response.send(request, R(throttle_time_ms=0, groups=groups))
