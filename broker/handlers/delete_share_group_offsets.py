"""DeleteShareGroupOffsets (v0): forget the state of every share-partition of the named topics in an
empty share group (their records are delivered from share.auto.offset.reset again)."""

from __future__ import annotations

from broker.handlers import handles
from broker.handlers._share_support import empty_share_group, share_services, top_level_error, topic_id_or_zero
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import DeleteShareGroupOffsetsResponse as R


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, error_response=top_level_error(R))
async def handle_delete_share_group_offsets(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    share = share_services(services)
    await empty_share_group(services, request, body.group_id, AclOperation.DELETE)
    cache = services.metadata_cache
    responses = []
    for topic in body.topics:
        outcome = Errors.NONE if cache.contains_topic(topic.topic_name) else Errors.UNKNOWN_TOPIC_OR_PARTITION
        if outcome is Errors.NONE:
            try:
                for partition in sorted(cache.topic_partitions(topic.topic_name)):
                    await share.partitions.delete_state(body.group_id, topic.topic_name, partition)
            except KafkaApiError as exc:
                outcome = exc.error
        known = outcome is not Errors.UNKNOWN_TOPIC_OR_PARTITION
        responses.append(R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=topic.topic_name, topic_id=topic_id_or_zero(services, topic.topic_name, known),
            error_code=int(outcome), error_message=error_message(outcome) if outcome else None))
    return Response.send(request, R(throttle_time_ms=0, error_code=0, responses=responses))
