"""Fetch (v0-17): consumer and replica reads, with incremental fetch sessions and long polls.

Data goes out as the log's FileRecords slices, so the network layer sends it with sendfile;
only Fetch v0-3 (magic 0/1 readers) gets records down-converted in memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from broker.delayed_fetch import DelayedFetch, enough
from broker.fetch_session import CachedPartition, FetchContext, IdPartition
from broker.handlers import answer, handles
from broker.network.request_channel import Request, Response
from broker.replica_manager import FetchPartitionSpec, PartitionReadResult
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.exceptions import CorruptRecordError, UnsupportedCompressionError
from protocol.messages import FetchResponse
from protocol.records.conversion import downconvert
from protocol.schema import ZERO_UUID
from storage.log import FetchIsolation

TopicPartition = tuple[str, int]
READ_COMMITTED = 1
TOPIC_ID_MIN_VERSION = 13
DOWN_CONVERSION_MAX_VERSION = 3
CURRENT_LEADER_MIN_VERSION = 12
DIVERGING_EPOCH_MIN_VERSION = 12  # last_fetched_epoch in, diverging_epoch out
NODE_ENDPOINTS_MIN_VERSION = 16


# Errors Kafka's readFromLocalLog answers without marking FailedFetchRequestsPerSec.
NOT_COUNTED_AS_FAILED = frozenset({Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER,
                                   Errors.UNKNOWN_LEADER_EPOCH, Errors.FENCED_LEADER_EPOCH,
                                   Errors.REPLICA_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR,
                                   Errors.OFFSET_OUT_OF_RANGE, Errors.INCONSISTENT_TOPIC_ID})


def _error_response(request: Request, error: Errors) -> Any:
    return FetchResponse(throttle_time_ms=0, error_code=int(error), session_id=0, responses=[])


def _fetch_data(services: BrokerServices, body: Any, version: int
                ) -> tuple[OrderedDict[TopicPartition, CachedPartition], dict[IdPartition, CachedPartition]]:
    """The request's partitions by name; partitions of topic ids not known here are returned apart."""
    cache = services.metadata_cache
    data: OrderedDict[TopicPartition, CachedPartition] = OrderedDict()
    unknown: dict[IdPartition, CachedPartition] = {}
    for topic in body.topics:
        if version >= TOPIC_ID_MIN_VERSION:
            name = cache.topic_name(topic.topic_id)
            topic_id = topic.topic_id
        else:
            name, topic_id = topic.topic, cache.topic_id(topic.topic)
        for p in topic.partitions:
            cached = CachedPartition(
                name or "", p.partition, topic_id, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                p.log_start_offset, p.last_fetched_epoch if version >= DIVERGING_EPOCH_MIN_VERSION else -1)
            if name is None:
                unknown[(topic.topic_id, p.partition)] = cached
            else:
                data[(name, p.partition)] = cached
    return data, unknown


def _forgotten(services: BrokerServices, body: Any, version: int) -> tuple[list[TopicPartition], list[IdPartition]]:
    """The forgotten partitions by name, and (v13+) by topic id for those not resolved yet."""
    names: list[TopicPartition] = []
    ids: list[IdPartition] = []
    for topic in getattr(body, "forgotten_topics_data", None) or []:
        if version >= TOPIC_ID_MIN_VERSION:
            ids.extend((topic.topic_id, p) for p in topic.partitions)
            name = services.metadata_cache.topic_name(topic.topic_id)
        else:
            name = topic.topic
        if name is not None:
            names.extend((name, p) for p in topic.partitions)
    return names, ids


def _partition_data(tp: TopicPartition, read: PartitionReadResult, fetch_offset: int, version: int,
                    read_committed: bool) -> Any:
    records: Any = read.records
    if version <= DOWN_CONVERSION_MAX_VERSION and len(records):
        raw = records.read_bytes() if not isinstance(records, bytes) else records
        try:
            records = bytes(downconvert(raw, 0 if version < 2 else 1, first_offset=fetch_offset))
        except (CorruptRecordError, UnsupportedCompressionError):
            return FetchResponse.PartitionData(partition_index=tp[1],
                                               error_code=int(Errors.UNSUPPORTED_COMPRESSION_TYPE),
                                               high_watermark=-1, records=b"")
    aborted = None
    if read_committed and read.aborted_transactions is not None and not read.error:
        aborted = [FetchResponse.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                   for t in read.aborted_transactions]
    data = FetchResponse.PartitionData(
        partition_index=tp[1], error_code=int(read.error), high_watermark=read.high_watermark,
        last_stable_offset=read.last_stable_offset, log_start_offset=read.log_start_offset,
        aborted_transactions=aborted, records=records,
    )
    if read.diverging_epoch is not None:
        data.diverging_epoch = FetchResponse.EpochEndOffset(epoch=read.diverging_epoch[0],
                                                            end_offset=read.diverging_epoch[1])
    return data


def _build_response(services: BrokerServices, context: FetchContext, results: dict[TopicPartition, PartitionReadResult],
                    version: int, read_committed: bool, listener: str, remember: bool = True) -> Any:
    """The response to send; ``remember=False`` leaves the session as it was (a response that
    is only measured, for a quota)."""
    topics: OrderedDict[str, Any] = OrderedDict()
    endpoints: dict[int, Any] = {}  # KIP-951 new-leader hints
    for tp, cached in context.partitions.items():
        read = results[tp]
        include = cached.must_respond(int(read.error), len(read.records) > 0 or read.diverging_epoch is not None,
                                      read.high_watermark, read.last_stable_offset, read.log_start_offset,
                                      remember)
        if context.incremental and not include:
            continue
        topic = topics.get(tp[0])
        if topic is None:
            topic = topics[tp[0]] = FetchResponse.FetchableTopicResponse(
                topic=tp[0], topic_id=cached.topic_id if cached.topic_id is not None else ZERO_UUID, partitions=[])
        data = _partition_data(tp, read, cached.fetch_offset, version, read_committed)
        if version >= CURRENT_LEADER_MIN_VERSION and read.error in (Errors.NOT_LEADER_OR_FOLLOWER,
                                                                    Errors.FENCED_LEADER_EPOCH):
            leader, epoch, node = services.metadata_cache.current_leader(tp[0], tp[1], listener)
            data.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            if node is not None and version >= NODE_ENDPOINTS_MIN_VERSION:
                endpoints[node[0]] = FetchResponse.NodeEndpoint(node_id=node[0], host=node[1], port=node[2],
                                                                rack=node[3])
        topic.partitions.append(data)
    responses = list(topics.values())
    for topic_id, partition in context.unresolved:
        responses.append(FetchResponse.FetchableTopicResponse(topic_id=topic_id, partitions=[
            FetchResponse.PartitionData(partition_index=partition, error_code=int(Errors.UNKNOWN_TOPIC_ID),
                                        high_watermark=-1, records=b"")]))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=context.session_id, responses=responses,
                         node_endpoints=[endpoints[k] for k in sorted(endpoints)])


def _unauthorized(services: BrokerServices, request: Request, replica_id: int,
                  partitions: OrderedDict[TopicPartition, CachedPartition]) -> dict[TopicPartition, PartitionReadResult]:
    """TOPIC_AUTHORIZATION_FAILED for the partitions the request may not read: a follower needs
    CLUSTER_ACTION, a consumer READ on each topic (Kafka's handleFetchRequest)."""
    auth = services.auth
    if auth.authorizer is None:
        return {}
    if replica_id >= 0:
        allowed = set(t for t, _ in partitions) if auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION) \
            else set()
    else:
        allowed = auth.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, partitions, lambda tp: tp[0])
    return {tp: PartitionReadResult(error=Errors.TOPIC_AUTHORIZATION_FAILED) for tp in partitions
            if tp[0] not in allowed}


def _quota_throttle_ms(services: BrokerServices, request: Request, replica_id: int,
                       measure: Callable[[], Response]) -> int:
    """How long a consumer's fetch answered with ``measure()`` is throttled by its quotas (0: not;
    measured only when a quota applies): a throttled fetch is answered empty instead, as Kafka 3.9
    does. Followers are not client-quota bound."""
    if replica_id >= 0 or not services.quotas.fetch_quotas_apply:
        return 0
    return services.quotas.fetch_throttle_ms(request, measure().size())


def _throttled(services: BrokerServices, request: Request, context: FetchContext, throttle_ms: int) -> Response:
    """Kafka's getThrottledResponse: no partitions; a session the fetch would have opened is not
    opened (session id 0), an incremental one goes on."""
    session_id = context.session_id
    if context.session is not None and not context.incremental:
        services.fetch_session_cache.remove(session_id)
        session_id = 0
    response = Response.send(request, FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id,
                                                    responses=[]))
    response.throttle(throttle_ms)
    return response


@handles(ApiKey.FETCH, error_response=_error_response)
async def handle_fetch(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    fetch_data, unknown = _fetch_data(services, body, version)
    forgotten, forgotten_ids = _forgotten(services, body, version)
    context = services.fetch_session_cache.new_context(
        body.session_id, body.session_epoch, fetch_data, forgotten, version >= TOPIC_ID_MIN_VERSION, unknown,
        forgotten_ids, services.metadata_cache.topic_name) if version >= 7 else FetchContext(fetch_data)
    if context.error:
        response = Response.send(request, _error_response(request, context.error))
        throttle_ms = _quota_throttle_ms(services, request, replica_id, lambda: response)
        if throttle_ms > 0:
            response.throttle(throttle_ms)  # the error's answer carries no data anyway
        return response
    read_committed = version >= 4 and body.isolation_level == READ_COMMITTED and replica_id < 0
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    else:
        isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
    max_bytes = body.max_bytes if version >= 3 else 0x7FFFFFFF
    if replica_id < 0:  # the first batch still comes whole
        max_bytes = int(min(max_bytes, services.config.fetch_max_bytes, services.quotas.fetch_bound(request)))
    min_bytes = min(body.min_bytes, max_bytes)
    denied = _unauthorized(services, request, replica_id, context.partitions)
    specs = {tp: FetchPartitionSpec(c.fetch_offset, c.max_bytes, c.current_leader_epoch, c.log_start_offset,
                                    c.last_fetched_epoch) for tp, c in context.partitions.items() if tp not in denied}
    replica_manager = services.replica_manager
    stats = replica_manager.topic_stats
    for topic, _ in specs:
        stats.mark_fetch(topic)

    def read() -> dict[TopicPartition, PartitionReadResult]:
        return {**denied, **replica_manager.read_from_local_log(specs, replica_id, isolation, max_bytes)}

    def response(final: dict[TopicPartition, PartitionReadResult]) -> Response:
        def build(remember: bool = True) -> Any:
            return _build_response(services, context, final, version, read_committed, request.listener_name,
                                   remember)

        # measured without touching the session: a throttled answer carries none of it
        throttle_ms = _quota_throttle_ms(services, request, replica_id, lambda: answer(request, lambda: build(False)))
        for tp in specs:  # once per request, on what is sent (a delayed fetch reads more than once)
            result = final[tp]
            if result.error not in NOT_COUNTED_AS_FAILED:
                stats.mark_failed_fetch(tp[0])
            if (size := len(result.records)) and not throttle_ms:
                stats.mark_bytes_out(tp[0], size, replica_id >= 0)
        if throttle_ms > 0:
            return _throttled(services, request, context, throttle_ms)
        return answer(request, build)

    results = read()
    if body.max_wait_ms <= 0 or not specs or enough(results, min_bytes):
        return response(results)

    def respond(final: dict[TopicPartition, PartitionReadResult]) -> None:
        services.request_channel.send_response(response(final))

    operation = DelayedFetch(body.max_wait_ms, min_bytes, read, respond)
    replica_manager.fetch_purgatory.try_complete_else_watch(operation, list(specs))
    return None
