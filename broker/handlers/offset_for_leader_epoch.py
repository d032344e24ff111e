"""OffsetForLeaderEpoch (v0-4): the end offset of a leader epoch, from the leader-epoch cache.

Consumers (KIP-320) and followers use it to detect log truncation after a leader change.
"""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.errors import error_of
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import OffsetForLeaderEpochResponse
from storage.errors import StorageError

EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


def _error_response(request: Request, error: Errors) -> Any:
    body = request.body()
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            EpochEndOffset(error_code=int(error), partition=p.partition) for p in t.partitions])
        for t in body.topics])


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, error_response=_error_response)
async def handle_offset_for_leader_epoch(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    auth = services.auth
    # Followers need CLUSTER_ACTION; since KIP-320 consumers may use DESCRIBE on the topic instead.
    if auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        described = {t.topic for t in body.topics}
    else:
        described = auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, body.topics,
                                           lambda t: t.topic)
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            try:
                if topic.topic not in described:
                    raise KafkaApiError(Errors.TOPIC_AUTHORIZATION_FAILED)
                partition = services.replica_manager.leader_partition(topic.topic, p.partition)
                partition.check_leader_epoch(p.current_leader_epoch)
                epoch, end_offset = partition.leader_log().end_offset_for_epoch(p.leader_epoch)
            except (KafkaApiError, StorageError) as exc:
                error = error_of(exc)
                assert error is not None
                partitions.append(EpochEndOffset(error_code=int(error), partition=p.partition))
                continue
            partitions.append(EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch,
                                             end_offset=end_offset))
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic,
                                                                              partitions=partitions))
    return Response.send(request, OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics))
