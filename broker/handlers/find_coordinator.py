"""FindCoordinator (v0-6): the leader of the key's ``__consumer_offsets`` (key type 0, groups) or
``__transaction_state`` (key type 1, transactional ids) partition.

The internal topic is created on first need, as Kafka's handler does (refused while fewer
brokers are alive than its replication factor); COORDINATOR_NOT_AVAILABLE until it has a live
leader.
"""

from __future__ import annotations

from typing import Any

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC
from broker.coordinator.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC
from broker.handlers import handles
from broker.handlers.metadata import auto_create_topic
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, error_message
from protocol.messages import FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
NO_NODE = (-1, "", -1)

Found = tuple[Errors, tuple[int, str, int]]


def _keys(request: Request) -> tuple[int, list[str]]:
    body = request.body()
    version = request.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY_TYPE
    return key_type, (list(body.coordinator_keys) if version >= 4 else [body.key])


def _response(version: int, results: list[tuple[str, Errors, tuple[int, str, int]]]) -> FindCoordinatorResponse:
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=node[0], host=node[1], port=node[2],
                                                error_code=int(error), error_message="")  # as Kafka: no message
            for key, error, node in results])
    _key, error, node = results[0]
    fields: dict[str, Any] = {"error_code": int(error), "node_id": node[0], "host": node[1], "port": node[2]}
    if version >= 1:
        fields.update(throttle_time_ms=0, error_message=None if error is Errors.NONE else error_message(error))
    return FindCoordinatorResponse(**fields)


def error_response(request: Request, error: Errors) -> FindCoordinatorResponse:
    _type, keys = _keys(request)
    return _response(request.api_version, [(key, error, NO_NODE) for key in keys])


def _partition_of(services: BrokerServices, key_type: int, key: str) -> tuple[str, int] | None:
    """The internal topic partition whose leader coordinates ``key``; None while that coordinator is not up."""
    if key_type == GROUP_KEY_TYPE:
        groups = services.group_coordinator
        if groups is None or not groups.active:
            return None
        return GROUP_METADATA_TOPIC, groups.manager.partition_for(key)
    transactions = services.transaction_coordinator
    if transactions is None or not transactions.active:
        return None
    return TRANSACTION_STATE_TOPIC, transactions.partition_for(key)


async def _find(services: BrokerServices, listener: str, key_type: int, key: str) -> Found:
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return Errors.INVALID_REQUEST, NO_NODE
    found = _partition_of(services, key_type, key)
    if found is None:
        return Errors.COORDINATOR_NOT_AVAILABLE, NO_NODE
    topic, partition = found
    cache = services.metadata_cache
    if not cache.contains_topic(topic):
        await auto_create_topic(services, topic)
        return Errors.COORDINATOR_NOT_AVAILABLE, NO_NODE
    state = cache.partition(topic, partition)
    if state is None or state.leader < 0 or not cache.has_broker(state.leader):
        return Errors.COORDINATOR_NOT_AVAILABLE, NO_NODE
    endpoint = cache.broker_endpoint(state.leader, listener)
    if endpoint is None:
        return Errors.COORDINATOR_NOT_AVAILABLE, NO_NODE
    return Errors.NONE, (state.leader, endpoint[0], endpoint[1])


@handles(ApiKey.FIND_COORDINATOR, error_response=error_response)
async def handle_find_coordinator(services: BrokerServices, request: Request) -> Response:
    key_type, keys = _keys(request)
    results = []
    for key in keys:
        error, node = await _find(services, request.listener_name, key_type, key)
        results.append((key, error, node))
    return Response.send(request, _response(request.api_version, results))
