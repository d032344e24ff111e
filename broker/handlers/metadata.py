"""Metadata (v0-12): brokers on the request's listener, cluster and controller ids, topics.

Unknown topics are auto-created when both the broker (auto.create.topics.enable) and the
client (allow_auto_topic_creation) allow it; the ZK-mode broker writes the assignment with
AdminZkClient and answers LEADER_NOT_AVAILABLE until the controller has elected leaders.
"""

from __future__ import annotations

import copy
import logging
import uuid
from typing import Any

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC
from broker.coordinator.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.services import BrokerServices
from coordination.admin_zk_client import NewTopic, validate_topic_name
from coordination.errors import CoordinationError, InvalidTopicError, TopicExistsError
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import MetadataResponse
from protocol.schema import ZERO_UUID

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})
TOPIC_ID_MIN_VERSION = 12  # the schema has topic ids from v10, Kafka reads them from v12

MetadataTopic = MetadataResponse.MetadataResponseTopic
MetadataPartition = MetadataResponse.MetadataResponsePartition


def _internal_topic_spec(services: BrokerServices, topic: str) -> NewTopic:
    config = services.config
    if topic == GROUP_METADATA_TOPIC:
        return NewTopic(topic, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor,
                        configs={"cleanup.policy": "compact", "compression.type": "producer",
                                 "segment.bytes": str(config.offsets_topic_segment_bytes)})
    return NewTopic(topic, config.transaction_state_log_num_partitions,
                    config.transaction_state_log_replication_factor,
                    configs={"cleanup.policy": "compact", "compression.type": "uncompressed",
                             "min.insync.replicas": str(config.transaction_state_log_min_isr),
                             "segment.bytes": str(config.transaction_state_log_segment_bytes),
                             "unclean.leader.election.enable": "false"})


async def auto_create_topic(services: BrokerServices, topic: str) -> Errors:
    """Create ``topic`` with the broker defaults; the error a metadata answer carries meanwhile."""
    spec = (_internal_topic_spec(services, topic) if topic in INTERNAL_TOPICS
            else NewTopic(topic, services.config.num_partitions, services.config.default_replication_factor))
    try:
        await services.pool.run_blocking(services.admin_zk.create_topic, spec)
    except TopicExistsError:
        return Errors.LEADER_NOT_AVAILABLE
    except CoordinationError as exc:
        log.info("Auto creation of topic %s failed: %s", topic, exc)
        return Errors[exc.kafka_error]
    log.info("Auto creation of topic %s with %d partitions and replication factor %d is successful",
             topic, spec.num_partitions, spec.replication_factor)
    return Errors.LEADER_NOT_AVAILABLE


def topic_metadata(services: BrokerServices, topic: str, listener: str, version: int,
                   reachable: frozenset[int] | None = None) -> Any:
    """As Kafka's ZK metadata cache: v0 lists only reachable replicas (REPLICA_NOT_AVAILABLE when some
    are not); v6+ says LISTENER_NOT_FOUND when the live leader lacks the request's listener.
    ``reachable``: the live brokers with ``listener`` (``reachable_brokers``), computed once per request.

    The per-partition loop of Metadata for every topic (10,000 partitions for a ``list_topics()`` of
    a big broker): the cache's replica lists go into the response as they are, and the broker
    checks are set lookups. The answer is kept until an UpdateMetadata changes the topic or the
    brokers (``MetadataCache.memoized``): callers copy it before changing it."""
    cache = services.metadata_cache
    return cache.memoized(topic, (listener, version),
                          lambda: _build_topic_metadata(services, topic, listener, version, reachable))


def _build_topic_metadata(services: BrokerServices, topic: str, listener: str, version: int,
                          reachable: frozenset[int] | None) -> Any:
    cache = services.metadata_cache
    live = cache.brokers
    if reachable is None:
        reachable = reachable_brokers(services, listener)
    no_leader = Errors.LISTENER_NOT_FOUND if version >= 6 else Errors.LEADER_NOT_AVAILABLE
    partitions = []
    for _, p in sorted(cache.topic_partitions(topic).items()):
        error = Errors.NONE
        leader, replicas, isr = p.leader, p.replicas, p.isr
        if version == 0 and not (reachable.issuperset(replicas) and reachable.issuperset(isr)):
            replicas = [r for r in replicas if r in reachable]
            isr = [r for r in isr if r in reachable]
            error = Errors.REPLICA_NOT_AVAILABLE
        if leader < 0 or leader not in live:
            error, leader = Errors.LEADER_NOT_AVAILABLE, -1
        elif leader not in reachable:
            error, leader = no_leader, -1
        partitions.append(MetadataPartition(
            error_code=int(error), partition_index=p.partition, leader_id=leader, leader_epoch=p.leader_epoch,
            replica_nodes=replicas, isr_nodes=isr, offline_replicas=p.offline_replicas))
    return MetadataTopic(error_code=0, name=topic, topic_id=cache.topic_id(topic),
                         is_internal=topic in INTERNAL_TOPICS, partitions=partitions)


def reachable_brokers(services: BrokerServices, listener: str) -> frozenset[int]:
    return frozenset(node.broker_id for node, _, _ in services.metadata_cache.alive_brokers(listener))


def _error_topic(name: str | None, error: Errors, topic_id: uuid.UUID = ZERO_UUID) -> Any:
    return MetadataTopic(error_code=int(error), name=name, topic_id=topic_id,
                         is_internal=name in INTERNAL_TOPICS, partitions=[])


def error_response(request: Request, error: Errors) -> Any:
    """Kafka's MetadataRequest.getErrorResponse: each requested topic with ``error``, no brokers."""
    topics = request.body().topics or []
    return MetadataResponse(throttle_time_ms=0, topics=[
        MetadataTopic(error_code=int(error), name=t.name or "", topic_id=getattr(t, "topic_id", ZERO_UUID),
                      is_internal=False, partitions=[]) for t in topics])


def _requested_names(services: BrokerServices, body: Any, version: int) -> tuple[list[str], list[Any], bool]:
    """The topic names asked for, in order without repeats, the answers for unknown topic ids, and
    whether the topics were asked for by id.

    From v12 topics may be named by id: when any id is given, Kafka looks topics up by id only.
    Before v12 a topic without a name, or with an id, is an invalid request.
    """
    requested = body.topics
    if version < TOPIC_ID_MIN_VERSION:
        for t in requested:
            if t.name is None:
                raise KafkaApiError(Errors.INVALID_REQUEST, f"Topic name can not be null for version {version}")
            if getattr(t, "topic_id", ZERO_UUID) != ZERO_UUID:
                raise KafkaApiError(Errors.INVALID_REQUEST,
                                    f"Topic IDs are not supported in requests for version {version}")
    ids = [t.topic_id for t in requested if version >= TOPIC_ID_MIN_VERSION and t.topic_id != ZERO_UUID]
    if not ids:
        if any(t.name is None for t in requested):
            # Kafka 3.9 fails on a null name without a topic id; its answer is this error.
            raise KafkaApiError(Errors.UNKNOWN_SERVER_ERROR, "a topic without a name or an id")
        return list(dict.fromkeys(t.name for t in requested)), [], False
    cache = services.metadata_cache
    names = {topic_id: cache.topic_name(topic_id) for topic_id in ids}
    unknown = [_error_topic(None, Errors.UNKNOWN_TOPIC_ID, topic_id)
               for topic_id, name in names.items() if name is None]
    return list(dict.fromkeys(name for name in names.values() if name is not None)), unknown, True


def _undescribable_topic(services: BrokerServices, name: str, by_id: bool) -> Any:
    """A topic the request may not DESCRIBE: asked by id, its name stays undisclosed (Kafka holds
    that the id is not sensitive, the name is); never marked internal."""
    if by_id:
        return MetadataTopic(error_code=int(Errors.TOPIC_AUTHORIZATION_FAILED), name=None,
                             topic_id=services.metadata_cache.topic_id(name), is_internal=False, partitions=[])
    return MetadataTopic(error_code=int(Errors.TOPIC_AUTHORIZATION_FAILED), name=name, topic_id=ZERO_UUID,
                         is_internal=False, partitions=[])


async def _named_topic(services: BrokerServices, request: Request, name: str, version: int,
                       allow_auto_create: bool) -> Any:
    """A topic the request may DESCRIBE: its metadata, or why there is none (auto-creating it)."""
    auth = services.auth
    if services.metadata_cache.contains_topic(name):
        return topic_metadata(services, name, request.listener_name, version)
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _error_topic(name, Errors.INVALID_TOPIC_EXCEPTION)
    if not allow_auto_create:
        return _error_topic(name, Errors.UNKNOWN_TOPIC_OR_PARTITION)
    # Auto-creation needs CREATE on the cluster or on the topic (Kafka's handleTopicMetadataRequest).
    if not (auth.authorize_cluster(request, AclOperation.CREATE, log_if_denied=False)
            or auth.authorize(request, AclOperation.CREATE, ResourceType.TOPIC, name)):
        return _error_topic(name, Errors.TOPIC_AUTHORIZATION_FAILED)
    return _error_topic(name, await auto_create_topic(services, name))


@handles(ApiKey.METADATA, error_response=error_response)
async def handle_metadata(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    cache = services.metadata_cache
    listener = request.listener_name
    config = services.config
    all_topics = body.topics is None or (version == 0 and not body.topics)
    allow_auto_create = config.auto_create_topics_enable and (version < 4 or body.allow_auto_topic_creation)
    unknown_ids: list[Any] = []
    auth = services.auth
    if all_topics and auth.authorizer is None and not (version >= 8 and (
            body.include_topic_authorized_operations or body.include_cluster_authorized_operations)):
        # The same bytes for every such request until the next UpdateMetadata (a client's
        # list_topics() on a broker with 10,000 partitions encoded them all each time).
        answer, parts = cache.memoized(None, (listener, version), lambda: _encoded_all_topics(services, listener, version))
        return Response.send_encoded(request, copy.copy(answer), parts)
    if all_topics:
        # Topics the request may not DESCRIBE are left out: their existence is not disclosed.
        described = auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, cache.all_topics(),
                                           log_if_denied=False)
        reachable = reachable_brokers(services, listener)
        topics = [topic_metadata(services, t, listener, version, reachable) for t in cache.all_topics()
                  if t in described]
    else:
        names, unknown_ids, by_id = _requested_names(services, body, version)
        # As Kafka orders them: the topics it may DESCRIBE first, then those it may not.
        described = auth.filter_authorized(request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        topics = [await _named_topic(services, request, name, version, allow_auto_create)
                  for name in names if name in described]
        topics += [_undescribable_topic(services, name, by_id) for name in names if name not in described]
    if version >= 8 and body.include_topic_authorized_operations:
        topics = [copy.copy(topic) for topic in topics]  # the answers topic_metadata keeps stay as they are
        for topic in topics:
            if topic.error_code != Errors.TOPIC_AUTHORIZATION_FAILED:
                topic.topic_authorized_operations = auth.authorized_operations(request, ResourceType.TOPIC, topic.name)
    response = _response(services, listener, unknown_ids + topics)
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        response.cluster_authorized_operations = (
            auth.authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)
            if auth.authorize_cluster(request, AclOperation.DESCRIBE) else 0)
    return Response.send(request, response)


def _response(services: BrokerServices, listener: str, topics: list[Any]) -> Any:
    cache = services.metadata_cache
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=node.broker_id, host=host, port=port, rack=node.rack)
               for node, host, port in cache.alive_brokers(listener)]
    return MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id=services.cluster_id,
        controller_id=cache.controller_id if cache.controller_id is not None else -1, topics=topics,
    )


def _encoded_all_topics(services: BrokerServices, listener: str, version: int) -> tuple[Any, list[Any]]:
    """The answer to Metadata of all topics without an authorizer, and its encoding."""
    reachable = reachable_brokers(services, listener)
    answer = _response(services, listener, [topic_metadata(services, t, listener, version, reachable)
                                            for t in services.metadata_cache.all_topics()])
    return answer, answer.encode_parts(version)
