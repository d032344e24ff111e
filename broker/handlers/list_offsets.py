"""ListOffsets (v0-9): earliest (-2), latest (-1), max timestamp (-3), or by timestamp.

As in Kafka, a consumer's "latest" is the last offset it may read: the high watermark under
READ_UNCOMMITTED, the last stable offset under READ_COMMITTED; replicas get the log end.
"""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.errors import error_of
from broker.network.request_channel import Request, Response
from broker.partition import Partition
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import ListOffsetsResponse
from storage.errors import StorageError
from storage.log import LATEST_TIMESTAMP

CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def _error_response(request: Request, error: Errors) -> Any:
    body = request.body()
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=int(error)) for p in t.partitions])
        for t in body.topics])


def _offset_for(partition: Partition, timestamp: int, replica_id: int, isolation_level: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch); (-1, -1, -1) when no offset qualifies."""
    tp_log = partition.leader_log()
    if replica_id != CONSUMER_REPLICA_ID and replica_id >= 0:
        last_fetchable = tp_log.log_end_offset
    elif isolation_level == READ_COMMITTED:
        last_fetchable = tp_log.last_stable_offset
    else:
        last_fetchable = tp_log.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return -1, last_fetchable, partition.leader_epoch
    found = tp_log.fetch_offset_by_timestamp(timestamp)
    if found is None or (timestamp >= 0 or timestamp == -3) and found.offset >= last_fetchable:
        return -1, -1, -1
    return found.timestamp, found.offset, found.leader_epoch if found.leader_epoch is not None else -1


@handles(ApiKey.LIST_OFFSETS, error_response=_error_response)
async def handle_list_offsets(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    isolation_level = body.isolation_level if version >= 2 else 0
    described = services.auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, body.topics,
                                                lambda t: t.name)
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            entry = PartitionResponse(partition_index=p.partition_index, error_code=0)
            try:
                if topic.name not in described:
                    raise KafkaApiError(Errors.TOPIC_AUTHORIZATION_FAILED)
                partition = services.replica_manager.leader_partition(topic.name, p.partition_index)
                partition.check_leader_epoch(p.current_leader_epoch)
                ts, offset, epoch = _offset_for(partition, p.timestamp, body.replica_id, isolation_level)
            except (KafkaApiError, StorageError) as exc:
                error = error_of(exc)
                assert error is not None
                entry.error_code = int(error)
                if version == 0:
                    entry.old_style_offsets = []
            else:
                if version == 0:
                    entry.old_style_offsets = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
                else:
                    entry.timestamp, entry.offset = ts, offset
                    if version >= 4:
                        entry.leader_epoch = epoch
            partitions.append(entry)
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return Response.send(request, ListOffsetsResponse(throttle_time_ms=0, topics=topics))
