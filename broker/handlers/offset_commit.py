"""OffsetCommit (v0-9): commits for partitions the cluster knows, answered once replicated."""

from __future__ import annotations

from typing import Any

from broker.coordinator.group.group_metadata import NO_GENERATION, UNKNOWN_MEMBER_ID, OffsetAndMetadata, now_ms
from broker.coordinator.group.group_operations import commit_offsets
from broker.handlers import handles
from broker.handlers._group_support import every_partition, group_coordinator, respond_later, split_commit
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import OffsetCommitResponse

DEFAULT_RETENTION_TIME = -1
DEFAULT_TIMESTAMP = -1

TopicPartition = tuple[str, int]


def _response(request: Request, errors: dict[TopicPartition, Errors]) -> OffsetCommitResponse:
    topics: dict[str, list[Any]] = {}
    for t in request.body().topics:
        parts = topics.setdefault(t.name, [])
        parts.extend(OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=int(errors[(t.name, p.partition_index)]))
            for p in t.partitions)
    fields: dict[str, Any] = {"throttle_time_ms": 0} if request.api_version >= 3 else {}
    return OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(name=name, partitions=parts)
                                        for name, parts in topics.items()], **fields)


def error_response(request: Request, error: Errors) -> OffsetCommitResponse:
    return _response(request, every_partition(request.body().topics, error))


@handles(ApiKey.OFFSET_COMMIT, error_response=error_response)
async def handle_offset_commit(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    coordinator = group_coordinator(services)
    now = now_ms()
    retention = body.retention_time_ms if 2 <= version <= 4 else DEFAULT_RETENTION_TIME

    def offset_of(p: Any) -> OffsetAndMetadata:
        commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != DEFAULT_TIMESTAMP else now
        return OffsetAndMetadata(
            p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
            p.committed_metadata if p.committed_metadata is not None else "", commit_ts,
            None if retention == DEFAULT_RETENTION_TIME else now + retention)

    errors, offsets = split_commit(services, request, body.topics, offset_of)
    if not offsets:
        return Response.send(request, _response(request, errors))

    async def commit() -> dict[TopicPartition, Errors]:
        stored = await commit_offsets(
            coordinator, body.group_id, body.member_id if version >= 1 else UNKNOWN_MEMBER_ID,
            body.group_instance_id if version >= 7 else None,
            body.generation_id_or_member_epoch if version >= 1 else NO_GENERATION, offsets, version)
        return {**errors, **stored}

    return respond_later(services, request, commit(), lambda result: _response(request, result))
