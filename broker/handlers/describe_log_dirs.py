"""DescribeLogDirs (v0-4): every log dir with the partitions it holds (size, offset lag 0 for
current replicas, no future replicas) and, from v4, the file system's total and usable bytes."""
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

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition


def _describe(services: BrokerServices, wanted: dict[str, set[int]] | None, version: int) -> list[Result]:
    """Blocking: stats the file systems and sums segment sizes."""
    by_dir: dict[str, dict[str, list[PartitionResult]]] = defaultdict(lambda: defaultdict(list))
    for (topic, partition), log in sorted(services.log_manager.all_logs().items()):
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        log_dir = os.path.dirname(os.path.abspath(log.dir))
        by_dir[log_dir][topic].append(
            PartitionResult(partition_index=partition, partition_size=log.size, offset_lag=0, is_future_key=False)
        )
    results = []
    for log_dir in services.log_manager.log_dirs:
        result = Result(
            log_dir=log_dir,
            topics=[TopicResult(name=t, partitions=ps) for t, ps in sorted(by_dir.get(log_dir, {}).items())],
        )
        try:
            stats = os.statvfs(log_dir)
        except OSError:
            result.error_code = int(Errors.KAFKA_STORAGE_ERROR)
            result.topics = []
        else:
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
        return Response.send(request, DescribeLogDirsResponse(results=[]))
    wanted = None if body.topics is None else {t.topic: set(t.partitions) for t in body.topics}
    results = await services.pool.run_blocking(_describe, services, wanted, request.api_version)
    return Response.send(request, DescribeLogDirsResponse(results=results))
