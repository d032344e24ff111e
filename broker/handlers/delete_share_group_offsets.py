"""DeleteShareGroupOffsets (v0): forget the state of every share-partition of the named topics in an
empty share group (their records are delivered from share.auto.offset.reset again)."""

from __future__ import annotations

from broker.handlers import handles
from broker.handlers._share_support import share_group_or_error, share_services, top_level_error
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import DeleteShareGroupOffsetsResponse as R
from protocol.schema import ZERO_UUID


_error_response = top_level_error(R)


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, error_response=_error_response)
async def handle_delete_share_group_offsets(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    share = share_services(services)
    error, group = share_group_or_error(services, request, body.group_id, AclOperation.DELETE)
    if group is None:
        return Response.send(request, _error_response(request, error))
    if group.members:
        return Response.send(request, _error_response(request, Errors.NON_EMPTY_GROUP))
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
        responses.append(R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=topic.topic_name, topic_id=cache.topic_id(topic.topic_name) if outcome is not
            Errors.UNKNOWN_TOPIC_OR_PARTITION else ZERO_UUID, error_code=int(outcome),
            error_message=error_message(outcome) if outcome else None))
    return Response.send(request, R(throttle_time_ms=0, error_code=0, responses=responses))
