"""CreatePartitions (v0-3), answered by the controller (Kafka's ZkAdminManager.createPartitions):
grow topics, with explicit replicas for the new partitions or Kafka's placement, then wait (up
to timeout_ms) until every partition of the topic has a leader in the metadata cache.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from broker.errors import api_error
from broker.admin.topic_validation import check_partition_increase
from broker.admin.waiting import missing_leaders, respond_when
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from coordination.errors import CoordinationError, NotControllerError
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import CreatePartitionsResponse

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def error_response(request: Request, error: Errors) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[Result(name=t.name, error_code=int(error)) for t in request.body().topics]
    )


def _fail(result: Result, error: Errors, message: str | None = None) -> None:
    result.error_code = int(error)
    result.error_message = message


def _zk_state(services: BrokerServices, topics: list[str]) -> tuple[set[str], set[int], dict[str, Any]]:
    """(topics queued for deletion, registered broker ids, current assignment per topic)."""
    zk = services.zk
    assignments = {t: zk.get_topic_assignment(t)[0] for t in topics}
    return zk.get_topic_deletions(), set(zk.get_broker_ids()), assignments


STRICT_MUTATION_QUOTA_VERSION = 3  # v3+: THROTTLING_QUOTA_EXCEEDED instead of throttling afterwards


@handles(ApiKey.CREATE_PARTITIONS, error_response)
async def handle_create_partitions(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    results = [Result(name=t.name) for t in body.topics]
    if not services.controller.is_active:
        for result in results:
            _fail(result, Errors.NOT_CONTROLLER)
        return Response.send(request, CreatePartitionsResponse(results=results))

    counts = Counter(t.name for t in body.topics)
    alterable = services.auth.filter_authorized(request, AclOperation.ALTER, ResourceType.TOPIC, body.topics,
                                                lambda t: t.name)
    candidates = {t.name: (t, r) for t, r in zip(body.topics, results) if counts[t.name] == 1 and t.name in alterable}
    for topic, result in zip(body.topics, results):
        if counts[topic.name] > 1:
            _fail(result, Errors.INVALID_REQUEST, "Duplicate topic in request.")
        elif topic.name not in alterable:
            _fail(result, Errors.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
    deleting, brokers, current = await services.pool.run_blocking(_zk_state, services, list(candidates))

    increases: dict[str, tuple[int, list[list[int]] | None]] = {}
    quota = services.quotas.controller_mutation.quota_for(
        request, strict=request.api_version >= STRICT_MUTATION_QUOTA_VERSION)
    for name, (topic, result) in candidates.items():
        if name in deleting:
            _fail(result, Errors.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
            continue
        assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        assignment = current[name]
        try:
            check_partition_increase(
                name, None if assignment is None else assignment.partitions, topic.count, assignments, brokers
            )
            if not body.validate_only:  # controller_mutation_rate counts the partitions added
                quota.record(topic.count - (0 if assignment is None else len(assignment.partitions)))
        except KafkaApiError as exc:
            _fail(result, exc.error, exc.message)
            continue
        increases[name] = (topic.count, assignments)

    grown = await _grow(services, increases, candidates, body.validate_only)
    wanted = {} if body.validate_only else {name: list(range(increases[name][0])) for name in grown}

    def respond() -> Response:
        for name, partitions in wanted.items():
            if body.timeout_ms <= 0 or missing_leaders(services, name, partitions):
                _fail(candidates[name][1], Errors.REQUEST_TIMED_OUT)
        return quota.apply(Response.send(request, CreatePartitionsResponse(results=results)))

    if not wanted or body.timeout_ms <= 0:
        return respond()
    respond_when(services, request, lambda: all(missing_leaders(services, t, p) == 0 for t, p in wanted.items()),
                 body.timeout_ms, respond)
    return None


async def _grow(
    services: BrokerServices,
    increases: dict[str, tuple[int, list[list[int]] | None]],
    candidates: dict[str, tuple[Any, Result]],
    validate_only: bool,
) -> list[str]:
    if not increases:
        return []
    try:
        outcome: dict[str, CoordinationError | None] = await services.pool.run_blocking(
            services.controller.create_partitions, increases, validate_only
        )
    except NotControllerError:
        for name in increases:
            _fail(candidates[name][1], Errors.NOT_CONTROLLER)
        return []
    for name, exc in outcome.items():
        if exc is not None:
            _fail(candidates[name][1], *api_error(exc))
    return [name for name, exc in outcome.items() if exc is None]
