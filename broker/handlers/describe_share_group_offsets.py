"""DescribeShareGroupOffsets (v0-1): each share-partition's start offset and leader epoch, read from
its share coordinator (ReadShareGroupStateSummary); -1 where nothing is stored. Lag (v1) is the
high watermark minus the start offset where this broker leads the partition, -1 elsewhere."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import share_group_or_error, share_services
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import DescribeShareGroupOffsetsResponse as R


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
async def handle_describe_share_group_offsets(services: BrokerServices, request: Request) -> Response:
    share = share_services(services)
    groups = []
    for wanted in request.body().groups:
        error, group = share_group_or_error(services, request, wanted.group_id, AclOperation.DESCRIBE)
        if group is None:
            groups.append(R.DescribeShareGroupOffsetsResponseGroup(
                group_id=wanted.group_id, topics=[], error_code=int(error), error_message=error_message(error)))
            continue
        topics = [(t.topic_name, list(t.partitions)) for t in wanted.topics] if wanted.topics is not None else \
            [(name, list(range(count))) for name, (_id, count) in sorted(group.subscription_metadata.items())]
        described = [await _describe_topic(services, share, wanted.group_id, name, partitions)
                     for name, partitions in topics]
        groups.append(R.DescribeShareGroupOffsetsResponseGroup(group_id=wanted.group_id, topics=described,
                                                               error_code=0))
    return Response.send(request, R(throttle_time_ms=0, groups=groups))


async def _describe_topic(services: BrokerServices, share: Any, group_id: str, topic: str, partitions: list[int]
                          ) -> Any:
    cache = services.metadata_cache
    if not cache.contains_topic(topic):
        return R.DescribeShareGroupOffsetsResponseTopic(topic_name=topic, partitions=[_failed(
            p, Errors.UNKNOWN_TOPIC_OR_PARTITION) for p in partitions])
    topic_id = cache.topic_id(topic)
    described = []
    for partition in partitions:
        try:
            start, leader_epoch = await share.partitions.persister.read_summary(group_id, topic_id, partition)
        except KafkaApiError as exc:
            described.append(_failed(partition, exc.error))
            continue
        described.append(R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=partition, start_offset=start, leader_epoch=leader_epoch,
            lag=_lag(services, topic, partition, start), error_code=0))
    return R.DescribeShareGroupOffsetsResponseTopic(topic_name=topic, topic_id=topic_id, partitions=described)


def _lag(services: BrokerServices, topic: str, partition: int, start: int) -> int:
    if start < 0:
        return -1
    try:
        _leader, tp_log = services.replica_manager.leader_partition_and_log(topic, partition)
    except KafkaApiError:
        return -1
    return max(tp_log.high_watermark - start, 0)


def _failed(partition: int, error: Errors) -> Any:
    return R.DescribeShareGroupOffsetsResponsePartition(partition_index=partition, start_offset=-1, leader_epoch=-1,
                                                        error_code=int(error), error_message=error_message(error))
