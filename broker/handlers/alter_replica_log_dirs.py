"""AlterReplicaLogDirs (v0-2): move replicas of this broker to other log dirs of it (KIP-113).

ALTER on the cluster is checked before the handler (``REQUEST_PERMISSIONS``); the moves
themselves are the ReplicaManager's (future logs, copied by the ReplicaAlterLogDirsManager).
As Kafka answers: LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``,
KAFKA_STORAGE_ERROR for an offline dir or partition, REPLICA_NOT_AVAILABLE for a replica this
broker does not host yet (it will be created in that dir).
"""
from __future__ import annotations

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AlterReplicaLogDirsResponse

TopicPartition = tuple[str, int]
TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


def _partition_dirs(request: Request) -> dict[TopicPartition, str]:
    """Kafka's partitionDirs: a partition named under two paths goes to the last one."""
    return {(topic.name, partition): log_dir.path
            for log_dir in request.body().dirs for topic in log_dir.topics for partition in topic.partitions}


def _response(errors: dict[TopicPartition, Errors]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, error_code=int(error)))
    return AlterReplicaLogDirsResponse(results=[TopicResult(topic_name=t, partitions=ps) for t, ps in by_topic.items()])


def error_response(request: Request, error: Errors) -> AlterReplicaLogDirsResponse:
    return _response(dict.fromkeys(_partition_dirs(request), error))


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, error_response)
async def handle_alter_replica_log_dirs(services: BrokerServices, request: Request) -> Response:
    errors = await services.replica_manager.alter_replica_log_dirs(_partition_dirs(request))
    return Response.send(request, _response(errors))
