"""CreateTopics (v0-7), answered by the controller as Kafka's ZkAdminManager.createTopics does:
per-topic checks, replica assignment and ZooKeeper writes by the controller, then a wait (up to
timeout_ms) until every new partition has a leader in this broker's metadata cache.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from broker.admin.config_describer import describe_topic
from broker.errors import api_error
from broker.admin.topic_configs import TopicConfigError, validate_topic_config
from broker.admin.topic_validation import check_new_topic, check_partition_count
from broker.admin.dynamic_broker_config import current_dynamic_config
from broker.admin.waiting import missing_leaders, respond_when
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.admin_zk_client import NewTopic, validate_topic_name
from coordination.errors import CoordinationError, NotControllerError
from coordination.model import uuid_from_b64
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import CreateTopicsResponse
from protocol.schema import ZERO_UUID

log = logging.getLogger(__name__)

Result = CreateTopicsResponse.CreatableTopicResult


def error_response(request: Request, error: Errors) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[Result(name=t.name, error_code=int(error)) for t in request.body().topics])


def _set_error(result: Result, error: Errors, message: str | None) -> None:
    """Kafka resets the metadata and configs of a topic whose creation failed."""
    result.error_code = int(error)
    result.error_message = message
    if error != Errors.NONE:
        result.configs = []
        result.num_partitions = -1
        result.replication_factor = -1
        result.topic_config_error_code = 0


def _new_topic(services: BrokerServices, topic: Any) -> tuple[NewTopic, int, int]:
    """Validated NewTopic plus the resolved partition count and replication factor."""
    if services.metadata_cache.contains_topic(topic.name):
        raise KafkaApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    null_configs = [c.name for c in topic.configs if c.value is None]
    check_new_topic(topic.num_partitions, topic.replication_factor, bool(topic.assignments), null_configs)
    validate_topic_name(topic.name)
    configs = {c.name: c.value for c in topic.configs}
    try:
        validate_topic_config(configs)
    except TopicConfigError as exc:
        raise KafkaApiError(Errors.INVALID_CONFIG, str(exc)) from None
    if topic.assignments:
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        first = min(assignment)
        return NewTopic(topic.name, assignment=assignment, configs=configs), len(assignment), len(assignment[first])
    config = services.config
    partitions = config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    check_partition_count(topic.name, partitions)
    factor = config.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
    return NewTopic(topic.name, topic.num_partitions, topic.replication_factor, configs=configs), partitions, factor


@handles(ApiKey.CREATE_TOPICS, error_response)
async def handle_create_topics(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    results = [Result(name=t.name, error_message=None) for t in body.topics]  # Kafka: null unless failed
    if not services.controller.is_active:
        for result in results:
            _set_error(result, Errors.NOT_CONTROLLER, None)
        return Response.send(request, CreateTopicsResponse(topics=results))

    counts = Counter(t.name for t in body.topics)
    to_create: dict[str, tuple[Result, NewTopic, int, int]] = {}
    for topic, result in zip(body.topics, results):
        if counts[topic.name] > 1:
            _set_error(result, Errors.INVALID_REQUEST, "Found multiple entries for this topic.")
            continue
        try:
            new_topic, partitions, factor = _new_topic(services, topic)
        except (KafkaApiError, CoordinationError) as exc:
            _set_error(result, *api_error(exc))
            continue
        to_create[topic.name] = (result, new_topic, partitions, factor)

    created = await _create(services, to_create, body.validate_only, version)
    wanted = {} if body.validate_only else {name: list(range(to_create[name][2])) for name in created}

    def respond() -> Response:
        for name, partitions in wanted.items():
            if body.timeout_ms <= 0 or missing_leaders(services, name, partitions):
                _set_error(to_create[name][0], Errors.REQUEST_TIMED_OUT, None)
        return Response.send(request, CreateTopicsResponse(topics=results))

    if not wanted or body.timeout_ms <= 0:
        return respond()
    respond_when(services, request, lambda: all(missing_leaders(services, t, p) == 0 for t, p in wanted.items()),
                 body.timeout_ms, respond)
    return None


async def _create(
    services: BrokerServices, to_create: dict[str, tuple[Result, NewTopic, int, int]], validate_only: bool, version: int
) -> list[str]:
    """Have the controller write the topics; fills results; returns the names that succeeded."""
    if not to_create:
        return []
    config = services.config
    try:
        outcome = await services.pool.run_blocking(
            services.controller.create_topics,
            [entry[1] for entry in to_create.values()],
            validate_only,
            config.num_partitions,
            config.default_replication_factor,
        )
    except NotControllerError as exc:
        for result, *_ in to_create.values():
            _set_error(result, Errors.NOT_CONTROLLER, str(exc))
        return []
    succeeded = [name for name, exc in outcome.items() if exc is None]
    dyn = await current_dynamic_config(services) if version >= 5 and succeeded else None
    for name, exc in outcome.items():
        result, new_topic, partitions, factor = to_create[name]
        if exc is not None:
            _set_error(result, *api_error(exc))
            continue
        if dyn is not None:
            result.num_partitions = partitions
            result.replication_factor = factor
            result.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
                    is_sensitive=e.is_sensitive,
                )
                for e in describe_topic(new_topic.configs or {}, dyn)
            ]
        if version >= 7 and not validate_only:
            result.topic_id = await _topic_id(services, name)
    return succeeded


async def _topic_id(services: BrokerServices, topic: str) -> Any:
    assignment, _ = await services.pool.run_blocking(services.zk.get_topic_assignment, topic)
    if assignment is None or not assignment.topic_id:
        return ZERO_UUID
    return uuid_from_b64(assignment.topic_id)
