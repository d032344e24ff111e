"""DeleteRecords (v0-2): advance the log start offset of led partitions (Kafka's
Partition.deleteRecordsOnLeader). Kafka then waits for the followers' low watermarks; without
follower fetching yet, the answer is sent once the leader applied it.
"""
from __future__ import annotations

from broker.errors import api_error
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import DeleteRecordsResponse
from storage.errors import StorageError

HIGH_WATERMARK = -1
TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


def error_response(request: Request, error: Errors) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(topics=[
        TopicResult(name=t.name, partitions=[
            PartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=int(error))
            for p in t.partitions
        ])
        for t in request.body().topics
    ])


def _delete_on_leader(services: BrokerServices, topic: str, partition: int, offset: int) -> int:
    """The new low watermark (log start offset) of the partition."""
    log = services.replica_manager.leader_partition(topic, partition).leader_log()
    if not log.config.delete_enabled:
        raise KafkaApiError(
            Errors.POLICY_VIOLATION,
            f"Records of partition {topic}-{partition} can not be deleted due to the configured policy",
        )
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise KafkaApiError(
            Errors.OFFSET_OUT_OF_RANGE, f"The offset {target} for partition {topic}-{partition} is not valid"
        )
    log.maybe_increment_log_start_offset(target, from_delete_records=True)
    return log.log_start_offset


@handles(ApiKey.DELETE_RECORDS, error_response)
async def handle_delete_records(services: BrokerServices, request: Request) -> Response:
    topics = []
    body = request.body()
    deletable = services.auth.filter_authorized(request, AclOperation.DELETE, ResourceType.TOPIC, body.topics,
                                                lambda t: t.name)
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            result = PartitionResult(partition_index=p.partition_index, low_watermark=-1)
            try:
                if topic.name not in deletable:
                    raise KafkaApiError(Errors.TOPIC_AUTHORIZATION_FAILED)
                result.low_watermark = _delete_on_leader(services, topic.name, p.partition_index, p.offset)
            except (KafkaApiError, StorageError) as exc:
                result.error_code = int(api_error(exc)[0])
            partitions.append(result)
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return Response.send(request, DeleteRecordsResponse(topics=topics))
