"""DeleteTopics (v0-6, by topic id from v6), answered by the controller: mark the topics for
deletion in ZooKeeper, then wait (up to timeout_ms) until they are gone from the metadata cache
(Kafka's DelayedDeleteTopics).
"""
from __future__ import annotations

from broker.errors import api_error
from broker.admin.waiting import respond_when
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.services import BrokerServices
from coordination.errors import NotControllerError
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import DeleteTopicsResponse
from protocol.schema import ZERO_UUID

Result = DeleteTopicsResponse.DeletableTopicResult


def _requested(request: Request) -> list[Result]:
    body = request.body()
    if request.api_version >= 6:
        return [Result(name=t.name, topic_id=t.topic_id) for t in body.topics]
    return [Result(name=name) for name in body.topic_names]


def error_response(request: Request, error: Errors) -> DeleteTopicsResponse:
    results = _requested(request)
    for result in results:
        result.error_code = int(error)
    return DeleteTopicsResponse(responses=results)


def _fail(result: Result, error: Errors, message: str | None = None) -> None:
    result.error_code = int(error)
    result.error_message = message


STRICT_MUTATION_QUOTA_VERSION = 5  # v5+: THROTTLING_QUOTA_EXCEEDED instead of throttling afterwards


@handles(ApiKey.DELETE_TOPICS, error_response)
async def handle_delete_topics(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    results = _requested(request)
    if not services.controller.is_active:
        for result in results:
            _fail(result, Errors.NOT_CONTROLLER)
        return Response.send(request, DeleteTopicsResponse(responses=results))
    if not services.config.delete_topic_enable:
        error = Errors.INVALID_REQUEST if version < 3 else Errors.TOPIC_DELETION_DISABLED
        for result in results:
            _fail(result, error)
        return Response.send(request, DeleteTopicsResponse(responses=results))

    cache = services.metadata_cache
    quota = services.quotas.controller_mutation.quota_for(request, strict=version >= STRICT_MUTATION_QUOTA_VERSION)
    to_delete: dict[str, Result] = {}
    for result in results:
        if version >= 6 and result.name is not None and result.topic_id != ZERO_UUID:
            _fail(result, Errors.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            continue
        by_id = result.name is None
        if by_id:
            name = cache.topic_name(result.topic_id)
            if name is None:
                _fail(result, Errors.UNKNOWN_TOPIC_ID)
                continue
            result.name = name
        if version >= 6 and result.topic_id == ZERO_UUID:
            result.topic_id = cache.topic_id(result.name)
        auth = services.auth
        if by_id and not auth.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, result.name):
            # the id is not secret, the name is: Kafka answers the denial without it
            result.name = None
            _fail(result, Errors.TOPIC_AUTHORIZATION_FAILED)
            continue
        if not auth.authorize(request, AclOperation.DELETE, ResourceType.TOPIC, result.name):
            _fail(result, Errors.TOPIC_AUTHORIZATION_FAILED)
            continue
        if not cache.contains_topic(result.name):
            _fail(result, Errors.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        try:
            quota.record(len(cache.topic_partitions(result.name)))  # controller_mutation_rate
        except KafkaApiError as exc:
            _fail(result, exc.error, exc.message)
            continue
        to_delete[result.name] = result

    deleted = await _mark_for_deletion(services, to_delete)

    def respond() -> Response:
        for name in deleted:
            if body.timeout_ms <= 0 or cache.contains_topic(name):
                _fail(to_delete[name], Errors.REQUEST_TIMED_OUT)
        return quota.apply(Response.send(request, DeleteTopicsResponse(responses=results)))

    if not deleted or body.timeout_ms <= 0:
        return respond()
    respond_when(services, request, lambda: not any(cache.contains_topic(t) for t in deleted), body.timeout_ms, respond)
    return None


async def _mark_for_deletion(services: BrokerServices, to_delete: dict[str, Result]) -> list[str]:
    if not to_delete:
        return []
    try:
        outcome = await services.pool.run_blocking(services.controller.delete_topics, list(to_delete))
    except NotControllerError:
        for result in to_delete.values():
            _fail(result, Errors.NOT_CONTROLLER)
        return []
    for name, exc in outcome.items():
        if exc is not None:
            _fail(to_delete[name], *api_error(exc))
    return [name for name, exc in outcome.items() if exc is None]
