"""ShareAcknowledge (v1-2): accept, release, reject (or renew) records the member acquired.

It needs an open share session (epoch 0 is INVALID_SHARE_SESSION_EPOCH: it cannot acknowledge
anything); epoch -1 acknowledges and then closes the session, releasing what the member still
holds. A partition whose records the member does not hold answers INVALID_RECORD_STATE and none
of its acknowledgements is applied.
"""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.handlers._share_support import (
    LeaderHints,
    acknowledgements,
    share_services,
    top_level_error,
    unauthorized_topics,
)
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from broker.share.share_partition_manager import now_ms
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ShareAcknowledgeResponse

R = ShareAcknowledgeResponse


_error_response = top_level_error(R)


@handles(ApiKey.SHARE_ACKNOWLEDGE, error_response=_error_response)
async def handle_share_acknowledge(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    share = share_services(services)
    group_id, member_id = body.group_id, body.member_id
    if not group_id or not member_id:
        return Response.send(request, _error_response(request, Errors.INVALID_REQUEST))
    if not services.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, group_id):
        return Response.send(request, _error_response(request, Errors.GROUP_AUTHORIZATION_FAILED))
    context = share.sessions.acknowledge_context(group_id, member_id, body.share_session_epoch, now_ms())
    if context.error is not Errors.NONE:
        return Response.send(request, _error_response(request, context.error))
    acks, ids, unknown = acknowledgements(services, body.topics)
    denied = unauthorized_topics(services, request, [tp[0] for tp in ids])
    errors = share.partitions.acknowledge(group_id, member_id, {tp: b for tp, b in acks.items() if tp[0] not in denied})
    changed = {(group_id, *tp) for tp, error in errors.items() if error is Errors.NONE}
    if context.closed:
        changed.update(share.partitions.release_member(group_id, member_id))
    # answered once durable: an acknowledged record is never delivered again after a failover
    for (_group, topic, partition), error in (await share.partitions.persist(changed)).items():
        errors[(topic, partition)] = error
    hints = LeaderHints(services, request.listener_name)
    by_topic: dict[Any, list[Any]] = {}
    for tp, topic_id in sorted(ids.items()):
        error = Errors.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied else errors.get(tp, Errors.NONE)
        leader_id, leader_epoch = hints.leader(tp, error)
        by_topic.setdefault(topic_id, []).append(R.PartitionData(
            partition_index=tp[1], error_code=int(error),
            current_leader=R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)))
    for topic_id, partition in unknown:
        by_topic.setdefault(topic_id, []).append(R.PartitionData(
            partition_index=partition, error_code=int(Errors.UNKNOWN_TOPIC_ID),
            current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))
    return Response.send(request, R(
        throttle_time_ms=0, error_code=0,
        acquisition_lock_timeout_ms=share.partitions.record_lock_duration_ms(body.group_id),
        responses=[R.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=partitions)
                   for topic_id, partitions in by_topic.items()],
        node_endpoints=[R.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
                        for node_id, (host, port, rack) in sorted(hints.endpoints.items())]))
