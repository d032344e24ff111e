"""DescribeLogDirs (v0-4): every log dir with the replicas it holds, as Kafka's
ReplicaManager.describeLogDirs answers: each current and future log with its size and offset
lag (a current log: how far its end is below the high watermark; a future log: how far it is
behind the current log; -1 when the partition is not hosted), from v4 the file system's total
and usable bytes, and KAFKA_STORAGE_ERROR (nothing else) for an offline dir."""
from __future__ import annotations

import os
from collections import defaultdict

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DescribeLogDirsResponse
from storage.log import Log
from storage.log_manager import parent_dir

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition
TopicPartition = tuple[str, int]
INVALID_OFFSET_LAG = -1


def _offset_lag(services: BrokerServices, tp: TopicPartition, tp_log: Log, future: bool) -> int:
    """Kafka's getLogEndOffsetLag."""
    current = services.replica_manager.local_log(*tp)
    if current is None:
        return INVALID_OFFSET_LAG
    if future:
        return current.log_end_offset - tp_log.log_end_offset
    return max(current.high_watermark - tp_log.log_end_offset, 0)


def _describe(services: BrokerServices, wanted: set[TopicPartition] | None, version: int) -> list[Result]:
    """Blocking: stats the file systems and sums segment sizes."""
    log_manager = services.log_manager
    logs_by_dir: dict[str, list[tuple[TopicPartition, Log, bool]]] = defaultdict(list)
    for future, logs in ((False, log_manager.all_logs()), (True, log_manager.all_future_logs())):
        for tp, tp_log in sorted(logs.items()):
            logs_by_dir[parent_dir(tp_log)].append((tp, tp_log, future))
    results = []
    for log_dir in log_manager.log_dirs:
        if not log_manager.is_log_dir_online(log_dir):
            results.append(Result(log_dir=log_dir, error_code=int(Errors.KAFKA_STORAGE_ERROR)))
            continue
        try:
            stats = os.statvfs(log_dir)
        except OSError:  # Kafka's catch-all answer for a file store it cannot read
            results.append(Result(log_dir=log_dir, error_code=int(Errors.UNKNOWN_SERVER_ERROR)))
            continue
        by_topic: dict[str, list[PartitionResult]] = {}
        for tp, tp_log, future in logs_by_dir.get(log_dir, ()):
            if wanted is None or tp in wanted:
                by_topic.setdefault(tp[0], []).append(PartitionResult(
                    partition_index=tp[1], partition_size=tp_log.size,
                    offset_lag=_offset_lag(services, tp, tp_log, future), is_future_key=future))
        result = Result(log_dir=log_dir, error_code=0,
                        topics=[TopicResult(name=t, partitions=ps) for t, ps in by_topic.items()])
        if version >= 4:
            result.total_bytes = stats.f_blocks * stats.f_frsize
            result.usable_bytes = stats.f_bavail * stats.f_frsize
        results.append(result)
    return results


@handles(ApiKey.DESCRIBE_LOG_DIRS)
async def handle_describe_log_dirs(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    if not services.auth.authorize_cluster(request, AclOperation.DESCRIBE):
        # Kafka answers a principal without DESCRIBE on the cluster with no log dirs at all.
        return Response.send(request, DescribeLogDirsResponse(
            results=[], error_code=int(Errors.CLUSTER_AUTHORIZATION_FAILED)))
    wanted = None if body.topics is None else {(t.topic, p) for t in body.topics for p in t.partitions}
    results = await services.pool.run_blocking(_describe, services, wanted, request.api_version)
    return Response.send(request, DescribeLogDirsResponse(results=results))
