"""OffsetFetch (v0-9): committed offsets of one group (v0-7) or of several (v8+)."""

from __future__ import annotations

from typing import Any

from broker.coordinator.group.group_coordinator import OffsetFetchEntry
from broker.coordinator.group.group_operations import fetch_offsets
from broker.handlers import handles
from broker.handlers._group_support import group_coordinator
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import OffsetFetchResponse

TopicPartition = tuple[str, int]
R = OffsetFetchResponse


def _requested(topics: Any) -> list[TopicPartition] | None:
    return None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]


def _by_topic(entries: dict[TopicPartition, OffsetFetchEntry]) -> dict[str, list[tuple[int, OffsetFetchEntry]]]:
    topics: dict[str, list[tuple[int, OffsetFetchEntry]]] = {}
    for (topic, partition), entry in entries.items():
        topics.setdefault(topic, []).append((partition, entry))
    return topics


def _single_group(request: Request, error: Errors, entries: dict[TopicPartition, OffsetFetchEntry]) -> R:
    version = request.api_version
    if error is not Errors.NONE and version < 2:  # no top-level error: every partition carries it
        entries = {tp: (-1, -1, "", error) for tp in _requested(request.body().topics) or []}
    topics = [R.OffsetFetchResponseTopic(name=topic, partitions=[R.OffsetFetchResponsePartition(
        partition_index=p, committed_offset=o, metadata=m, error_code=int(e),
        **({"committed_leader_epoch": epoch} if version >= 5 else {}))
        for p, (o, epoch, m, e) in parts]) for topic, parts in _by_topic(entries).items()]
    fields: dict[str, Any] = {"throttle_time_ms": 0} if version >= 3 else {}
    if version >= 2:
        fields["error_code"] = int(error)
    return R(topics=topics, **fields)


def _group(group_id: str, error: Errors, entries: dict[TopicPartition, OffsetFetchEntry]) -> Any:
    return R.OffsetFetchResponseGroup(group_id=group_id, error_code=int(error), topics=[
        R.OffsetFetchResponseTopics(name=topic, partitions=[R.OffsetFetchResponsePartitions(
            partition_index=p, committed_offset=o, committed_leader_epoch=epoch, metadata=m, error_code=int(e))
            for p, (o, epoch, m, e) in parts]) for topic, parts in _by_topic(entries).items()])


def error_response(request: Request, error: Errors) -> R:
    if request.api_version >= 8:
        return R(throttle_time_ms=0, groups=[_group(g.group_id, error, {}) for g in request.body().groups])
    return _single_group(request, error, {})


def _fetch(services: BrokerServices, request: Request, group_id: str, require_stable: bool,
           requested: list[TopicPartition] | None, member: tuple[str | None, int] = (None, -1)
           ) -> tuple[Errors, dict[TopicPartition, OffsetFetchEntry]]:
    """Kafka's checks around the fetch: DESCRIBE on the group, and offsets only of topics the
    request may DESCRIBE (the others answer TOPIC_AUTHORIZATION_FAILED, or are left out of "all")."""
    auth = services.auth
    if not auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return Errors.GROUP_AUTHORIZATION_FAILED, {}
    coordinator = group_coordinator(services)
    if requested is None:
        error, entries = fetch_offsets(coordinator, group_id, require_stable, None, *member)
        described = auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, entries,
                                           lambda tp: tp[0], log_if_denied=False)
        return error, {tp: entry for tp, entry in entries.items() if tp[0] in described}
    described = auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, requested, lambda tp: tp[0])
    error, entries = fetch_offsets(coordinator, group_id, require_stable,
                                   [tp for tp in requested if tp[0] in described], *member)
    denied: OffsetFetchEntry = (-1, -1, "", Errors.TOPIC_AUTHORIZATION_FAILED)
    return error, {**entries, **{tp: denied for tp in requested if tp[0] not in described}}


@handles(ApiKey.OFFSET_FETCH, error_response=error_response)
async def handle_offset_fetch(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    require_stable = body.require_stable if version >= 7 else False
    if version >= 8:
        groups = []
        for group in body.groups:
            member = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
            error, entries = _fetch(services, request, group.group_id, require_stable, _requested(group.topics),
                                    member)
            groups.append(_group(group.group_id, error, entries))
        return Response.send(request, R(throttle_time_ms=0, groups=groups))
    requested = _requested(body.topics)
    if version < 2 and requested is None:
        requested = []
    error, entries = _fetch(services, request, body.group_id, require_stable, requested)
    return Response.send(request, _single_group(request, error, entries))
