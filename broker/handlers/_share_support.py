"""Shared by the share-group handlers: the share components, or the error that says they are off."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.network.request_channel import Response
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.schema import ZERO_UUID

if TYPE_CHECKING:
    from broker.network.request_channel import Request
    from broker.services import BrokerServices
    from broker.coordinator.share.share_group import ShareGroup
    from broker.share.share_coordinator import ShareCoordinator
    from broker.share.share_coordinator_shard import ShareGroupOffset
    from broker.share.share_services import ShareServices


def share_services(services: BrokerServices) -> ShareServices:
    """The broker's share components; UNSUPPORTED_VERSION while share groups are off (the APIs are
    then not advertised, so only a client that ignores ApiVersions gets here)."""
    if services.share is None:
        raise KafkaApiError(Errors.UNSUPPORTED_VERSION)
    return services.share


TopicPartition = tuple[str, int]
IdPartition = tuple[uuid.UUID, int]
AckBatches = list[tuple[int, int, list[int]]]


def acknowledgements(services: BrokerServices, topics: Any) -> tuple[dict[TopicPartition, AckBatches],
                                                                      dict[TopicPartition, uuid.UUID],
                                                                      list[IdPartition]]:
    """A request's AcknowledgementBatches by partition, the topic id of each named partition, and
    the (topic id, partition) pairs of topics this broker does not know (UNKNOWN_TOPIC_ID)."""
    found: dict[TopicPartition, AckBatches] = {}
    ids: dict[TopicPartition, uuid.UUID] = {}
    unknown: list[IdPartition] = []
    for topic in topics:
        name = services.metadata_cache.topic_name(topic.topic_id)
        for partition in topic.partitions:
            if name is None:
                unknown.append((topic.topic_id, partition.partition_index))
                continue
            tp = (name, partition.partition_index)
            ids[tp] = topic.topic_id
            if partition.acknowledgement_batches:
                found[tp] = [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                             for b in partition.acknowledgement_batches]
    return found, ids, unknown


def unauthorized_topics(services: BrokerServices, request: Request, topics: Iterable[str]) -> set[str]:
    """Topics the request may not READ (their partitions answer TOPIC_AUTHORIZATION_FAILED)."""
    return {t for t in set(topics)
            if not services.auth.authorize(request, AclOperation.READ, ResourceType.TOPIC, t)}


class LeaderHints:
    """CurrentLeader of each partition answered NOT_LEADER_OR_FOLLOWER, and the NodeEndpoints of
    those leaders (KIP-951's hints, as ShareFetch and ShareAcknowledge carry them)."""

    def __init__(self, services: BrokerServices, listener: str) -> None:
        self._cache = services.metadata_cache
        self._listener = listener
        self.endpoints: dict[int, tuple[str, int, str | None]] = {}

    def leader(self, tp: TopicPartition, error: Errors) -> tuple[int, int]:
        if error is not Errors.NOT_LEADER_OR_FOLLOWER:
            return -1, -1
        leader_id, epoch, node = self._cache.current_leader(tp[0], tp[1], self._listener)
        if node is not None:
            self.endpoints[node[0]] = (node[1], node[2], node[3])
        return leader_id, epoch


# --- ListGroups and DeleteGroups for share groups (the classic handlers call these) -------------

SHARE_GROUP_TYPE = "share"


def listed_share_groups(services: BrokerServices, states: list[str], types: set[str]) -> list[tuple[str, str]]:
    """(group id, state) of the share groups ListGroups answers with its filters (types and states
    match case-insensitively, as Kafka's); none while share groups are off."""
    if services.share is None or (types and SHARE_GROUP_TYPE not in types):
        return []
    wanted = {s.lower() for s in states}
    return [(group.group_id, group.state.value) for group in services.share.coordinator.groups.values()
            if not wanted or group.state.value.lower() in wanted]


async def delete_share_groups(services: BrokerServices, names: list[str]) -> dict[str, Errors]:
    """DeleteGroups for the names that are share groups: an empty one goes with its share-partitions'
    state, a non-empty one is NON_EMPTY_GROUP. Names that are not share groups are left out."""
    if services.share is None:
        return {}
    results = {}
    for name in names:
        if name in services.share.coordinator.groups:
            results[name], group = await services.share.coordinator.delete_group(name)
            if group is not None:
                await services.share.partitions.delete_group(name, [
                    (topic, partition) for topic, partitions in group.initialized_topics.values()
                    for partition in partitions])
    return results


# --- the share-group state RPCs (83-87), broker to share coordinator ----------------------------

def state_coordinator(services: BrokerServices, request: Request) -> ShareCoordinator:
    """The share coordinator, once the caller may CLUSTER_ACTION (these RPCs come from brokers)."""
    share = share_services(services)
    if not services.auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION):
        raise KafkaApiError(Errors.CLUSTER_AUTHORIZATION_FAILED)
    return share.state


async def per_partition(body: Any, answer: Callable[[tuple[str, uuid.UUID, int], Any], Awaitable[Any]],
                        failed: Callable[[int, KafkaApiError], Any]) -> list[tuple[uuid.UUID, list[Any]]]:
    """``answer((group, topic id, partition), partition data)`` for each partition of a state RPC,
    by topic id; a partition whose answer raised KafkaApiError gets ``failed(partition, error)``."""
    results = []
    for topic in body.topics:
        partitions = []
        for data in topic.partitions:
            try:
                partitions.append(await answer((body.group_id, topic.topic_id, data.partition), data))
            except KafkaApiError as exc:
                partitions.append(failed(data.partition, exc))
        results.append((topic.topic_id, partitions))
    return results


def state_result(response: Any, partition: int, error: Errors, message: str | None = None, **fields: Any) -> Any:
    """A state RPC's PartitionResult (``response`` is the response class)."""
    return response.PartitionResult(partition=partition, error_code=int(error),
                                    error_message=(message or error_message(error)) if error else None, **fields)


async def answer_state_rpc(request: Request, response: Any, result_struct: str,
                           answer: Callable[[tuple[str, uuid.UUID, int], Any], Awaitable[Any]],
                           **failed_fields: Any) -> Response:
    """Answer a state RPC: ``answer`` per partition, failures as ``state_result`` with ``failed_fields``."""
    results = await per_partition(request.body(), answer,
                                  lambda p, e: state_result(response, p, e.error, e.message, **failed_fields))
    struct = getattr(response, result_struct)
    return Response.send(request, response(results=[struct(topic_id=topic_id, partitions=partitions)
                                                    for topic_id, partitions in results]))


async def answer_state_read(services: BrokerServices, request: Request, response: Any, result_struct: str,
                            unknown: dict[str, int], fields: Callable[[ShareGroupOffset], dict[str, Any]]) -> Response:
    """Answer ReadShareGroupState or its summary: each share-partition's stored state as ``fields``
    lays it out; UNKNOWN_TOPIC_OR_PARTITION with the ``unknown`` values for one never stored (as Kafka)."""
    coordinator = state_coordinator(services, request)

    async def read(key: tuple[str, uuid.UUID, int], data: Any) -> Any:
        state = coordinator.read(key)
        if state is None:
            return state_result(response, data.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION, **unknown)
        return state_result(response, data.partition, Errors.NONE, **fields(state))

    return await answer_state_rpc(request, response, result_struct, read, **unknown)


# --- the share-group offsets admin APIs (90-92), at the group coordinator -------------------------

def share_group_or_error(services: BrokerServices, request: Request, group_id: str, operation: AclOperation
                         ) -> tuple[Errors, Any]:
    """(NONE, the share group) or (the error, None): authorization, coordinator, group kind."""
    from broker.handlers._group_support import group_coordinator

    if not services.auth.authorize(request, operation, ResourceType.GROUP, group_id):
        return Errors.GROUP_AUTHORIZATION_FAILED, None
    status = group_coordinator(services).validate_group_status(group_id)
    if status is not None:
        return status, None
    group = share_services(services).coordinator.groups.get(group_id)
    return (Errors.GROUP_ID_NOT_FOUND, None) if group is None else (Errors.NONE, group)


async def empty_share_group(services: BrokerServices, request: Request, group_id: str, operation: AclOperation,
                            create: bool = False) -> ShareGroup:
    """The share group whose offsets AlterShareGroupOffsets or DeleteShareGroupOffsets change: one
    without members (NON_EMPTY_GROUP otherwise). An unknown id is GROUP_ID_NOT_FOUND, or with
    ``create`` (AlterShareGroupOffsets, as Kafka) becomes a new empty share group."""
    error, group = share_group_or_error(services, request, group_id, operation)
    coordinator = share_services(services).coordinator
    if error is Errors.GROUP_ID_NOT_FOUND and create and not coordinator.is_other_group_type(group_id):
        group = await coordinator.create_empty_group(group_id)
    elif group is None:
        raise KafkaApiError(error)
    if group.members:
        raise KafkaApiError(Errors.NON_EMPTY_GROUP)
    return group


def topic_id_or_zero(services: BrokerServices, topic: str, known: bool) -> uuid.UUID:
    """A response's TopicId: the topic's, or the zero id for a topic this broker does not know."""
    return services.metadata_cache.topic_id(topic) if known else ZERO_UUID


def is_share_group(services: BrokerServices, group_id: str) -> bool:
    """Whether ``group_id`` is a share group's (a classic JoinGroup for it is refused)."""
    return services.share is not None and group_id in services.share.coordinator.groups


def top_level_error(response: Any) -> Callable[[Request, Errors], Any]:
    """The error_response of an API whose response has a top-level error and a Responses list."""
    def build(_request: Request, error: Errors) -> Any:
        return response(throttle_time_ms=0, error_code=int(error), error_message=error_message(error), responses=[])
    return build
