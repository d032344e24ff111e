"""ShareFetch (v1-2): acknowledge what the request carries, then acquire records for the member
from every partition of its share session, waiting up to MaxWaitMs when there is nothing yet.

The share session decides which partitions are fetched (epoch 0 opens it, -1 closes it and then
nothing is fetched); acknowledgements ride along and are answered in AcknowledgeErrorCode. Epoch 0
with acknowledgements and epoch -1 with partitions to fetch are INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.delayed_operation import DelayedOperation
from broker.handlers import answer, handles
from broker.handlers._share_support import (
    LeaderHints,
    TopicPartition,
    acknowledgements,
    share_services,
    top_level_error,
    unauthorized_topics,
)
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from broker.share.share_partition_manager import ShareFetchPartitionResult, now_ms
from broker.share.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ShareFetchRequest, ShareFetchResponse

R = ShareFetchResponse
DEFAULT_MAX_RECORDS = 500  # a v1 request without MaxRecords (0): Kafka's share consumer default

Results = dict[TopicPartition, ShareFetchPartitionResult]


_error_response = top_level_error(R)


class DelayedShareFetch(DelayedOperation):
    """A share fetch that found nothing to acquire, retried as its partitions get new data."""

    def __init__(self, delay_ms: int, acquire: Callable[[], Results], respond: Callable[[Results], None]) -> None:
        super().__init__(delay_ms)
        self.acquire = acquire
        self.respond = respond
        self._result: Results | None = None

    def try_complete(self) -> bool:
        result = self.acquire()
        if _has_data(result):
            self._result = result
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.respond(self._result if self._result is not None else self.acquire())


def _has_data(results: Results) -> bool:
    return any(r.acquired or r.error for r in results.values())


@handles(ApiKey.SHARE_FETCH, error_response=_error_response)
async def handle_share_fetch(services: BrokerServices, request: Request) -> Response | None:
    body: ShareFetchRequest = request.body()
    share = share_services(services)
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    if not group_id or not member_id:
        return Response.send(request, _error_response(request, Errors.INVALID_REQUEST))
    if not services.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, group_id):
        return Response.send(request, _error_response(request, Errors.GROUP_AUTHORIZATION_FAILED))
    acks, ids, unknown = acknowledgements(services, body.topics)
    forgotten = [(name, p) for t in body.forgotten_topics_data
                 if (name := services.metadata_cache.topic_name(t.topic_id)) is not None for p in t.partitions]
    if (epoch == INITIAL_EPOCH and (acks or any(p.acknowledgement_batches for t in body.topics
                                                for p in t.partitions))) \
            or (epoch == FINAL_EPOCH and ids):
        return Response.send(request, _error_response(request, Errors.INVALID_REQUEST))
    context = share.sessions.new_context(group_id, member_id, epoch, ids.items(), forgotten, now_ms())
    if context.error is not Errors.NONE:
        return Response.send(request, _error_response(request, context.error))
    session = context.session
    assert session is not None
    denied = unauthorized_topics(services, request, [tp[0] for tp in session.partitions] + [tp[0] for tp in acks])
    partitions = share.partitions
    ack_errors = partitions.acknowledge(group_id, member_id, {tp: b for tp, b in acks.items() if tp[0] not in denied})
    changed = {(group_id, *tp) for tp, error in ack_errors.items() if error is Errors.NONE}
    topic_ids = {**session.partitions, **ids}
    fetch_tps: list[TopicPartition] = []
    if context.closed:
        changed.update(partitions.release_member(group_id, member_id))
    else:
        fetch_tps = [tp for tp in session.partitions if tp[0] not in denied]
    not_loaded = await partitions.initialize(group_id, fetch_tps)
    fetch_tps = [tp for tp in fetch_tps if tp not in not_loaded]
    max_records = body.max_records if body.max_records > 0 else DEFAULT_MAX_RECORDS
    read_committed = partitions.read_committed(group_id)

    def acquire() -> Results:
        return partitions.acquire(group_id, member_id, fetch_tps, body.max_bytes, max_records, read_committed)

    async def respond(results: Results) -> Response:
        """Write back what changed (acknowledged and acquired records), then answer."""
        failed = await partitions.persist(changed | {(group_id, *tp) for tp, r in results.items() if r.acquired})
        for (_group, *tp), error in failed.items():
            tp = tuple(tp)
            if tp in ack_errors:
                ack_errors[tp] = error
            if tp in results:  # not durably acquired: not handed out (the locks release them)
                results[tp] = ShareFetchPartitionResult(error)
        results.update({tp: ShareFetchPartitionResult(error) for tp, error in not_loaded.items()})
        return answer(request, lambda: _response(services, request, results, ack_errors, denied, topic_ids, unknown,
                                                 partitions.record_lock_duration_ms(body.group_id)))

    results = acquire()
    if _has_data(results) or body.max_wait_ms <= 0 or not fetch_tps:
        return await respond(results)

    def send_later(final: Results) -> None:
        task = asyncio.ensure_future(respond(final))
        task.add_done_callback(lambda f: f.cancelled() or f.exception() is not None
                               or services.request_channel.send_response(f.result()))

    services.replica_manager.fetch_purgatory.try_complete_else_watch(
        DelayedShareFetch(body.max_wait_ms, acquire, send_later), list(fetch_tps))
    return None


def _response(services: BrokerServices, request: Request, results: Results, ack_errors: dict[TopicPartition, Errors],
              denied: set[str], topic_ids: dict[TopicPartition, Any], unknown: list[tuple[Any, int]],
              lock_ms: int) -> R:
    hints = LeaderHints(services, request.listener_name)
    by_topic: dict[Any, list[Any]] = {}
    for tp in sorted(set(results) | set(ack_errors) | {tp for tp in topic_ids if tp[0] in denied}):
        result = results.get(tp, ShareFetchPartitionResult())
        error = Errors.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied else result.error
        ack_error = ack_errors.get(tp, Errors.NONE) if tp[0] not in denied else Errors.TOPIC_AUTHORIZATION_FAILED
        leader_id, leader_epoch = hints.leader(tp, error)
        by_topic.setdefault(topic_ids[tp], []).append(R.PartitionData(
            partition_index=tp[1], error_code=int(error), acknowledge_error_code=int(ack_error),
            current_leader=R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
            records=result.records,
            acquired_records=[R.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                delivery_count=a.delivery_count) for a in result.acquired]))
    for topic_id, partition in unknown:
        by_topic.setdefault(topic_id, []).append(R.PartitionData(
            partition_index=partition, error_code=int(Errors.UNKNOWN_TOPIC_ID),
            acknowledge_error_code=int(Errors.UNKNOWN_TOPIC_ID),
            current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b""))
    return R(throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareFetchableTopicResponse(topic_id=topic_id, partitions=partitions)
                        for topic_id, partitions in by_topic.items()],
             node_endpoints=[R.NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
                             for node_id, (host, port, rack) in sorted(hints.endpoints.items())])
