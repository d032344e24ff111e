"""AlterShareGroupOffsets (v0): start share-partitions of an empty share group over at given offsets
(a new state epoch at their share coordinators; the leaders reload). A group with members is
NON_EMPTY_GROUP; a group id not known yet becomes an empty share group, as Kafka creates it."""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import empty_share_group, share_services, top_level_error, topic_id_or_zero
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import AlterShareGroupOffsetsResponse as R


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS, error_response=top_level_error(R))
async def handle_alter_share_group_offsets(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    share = share_services(services)
    await empty_share_group(services, request, body.group_id, AclOperation.READ, create=True)
    cache = services.metadata_cache
    responses = []
    for topic in body.topics:
        known = cache.contains_topic(topic.topic_name)
        results = []
        for p in topic.partitions:
            outcome = Errors.UNKNOWN_TOPIC_OR_PARTITION if not known or p.partition_index not in \
                cache.topic_partitions(topic.topic_name) else Errors.NONE
            if outcome is Errors.NONE:
                try:
                    await share.partitions.alter_start_offset(body.group_id, topic.topic_name, p.partition_index,
                                                              p.start_offset)
                except KafkaApiError as exc:
                    outcome = exc.error
            results.append(_partition(p.partition_index, outcome))
        responses.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=topic.topic_name, topic_id=topic_id_or_zero(services, topic.topic_name, known),
            partitions=results))
    return Response.send(request, R(throttle_time_ms=0, error_code=0, responses=responses))


def _partition(partition: int, error: Errors) -> Any:
    return R.AlterShareGroupOffsetsResponsePartition(partition_index=partition, error_code=int(error),
                                                     error_message=error_message(error) if error else None)
