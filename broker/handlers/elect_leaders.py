"""ElectLeaders (v0-2): preferred or unclean leader election by the controller, then a wait (up
to timeout_ms) until this broker's metadata cache shows the new leader epoch (Kafka's
DelayedElectLeader); partitions still waiting at the deadline get REQUEST_TIMED_OUT."""
from __future__ import annotations

from collections import defaultdict

from broker.errors import api_error
from broker.admin.waiting import controller_result, respond_when
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.errors import NotControllerError
from coordination.model import TopicPartition
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ElectLeadersResponse

PREFERRED, UNCLEAN = 0, 1
Outcome = dict[TopicPartition, tuple[Errors, "str | None"]]


def _requested(request: Request) -> set[TopicPartition] | None:
    body = request.body()
    if body.topic_partitions is None:
        return None
    return {TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions}


def _response(outcome: Outcome) -> ElectLeadersResponse:
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = defaultdict(list)
    for tp in sorted(outcome):
        error, message = outcome[tp]
        by_topic[tp.topic].append(
            ElectLeadersResponse.PartitionResult(
                partition_id=tp.partition, error_code=int(error), error_message=message
            )
        )
    return ElectLeadersResponse(replica_election_results=[
        ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=results)
        for topic, results in by_topic.items()
    ])


def error_response(request: Request, error: Errors) -> ElectLeadersResponse:
    return _response({tp: (error, None) for tp in _requested(request) or ()})


@handles(ApiKey.ELECT_LEADERS, error_response)
async def handle_elect_leaders(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    partitions = _requested(request)
    election_type = body.election_type if request.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):
        outcome: Outcome = {tp: (Errors.INVALID_REQUEST, f"Unknown election type {election_type}")
                            for tp in partitions or ()}
        return Response.send(request, _response(outcome))
    cache = services.metadata_cache

    def epoch(tp: TopicPartition) -> int:
        state = cache.partition(tp.topic, tp.partition)
        return -1 if state is None else state.leader_epoch

    known = partitions if partitions is not None else {
        TopicPartition(topic, p) for topic in cache.all_topics() for p in cache.topic_partitions(topic)
    }
    before = {tp: epoch(tp) for tp in known}
    try:
        results = await controller_result(services.controller.elect_leaders(partitions, election_type == UNCLEAN))
    except NotControllerError:
        return Response.send(request, _response({tp: (Errors.NOT_CONTROLLER, None) for tp in partitions or ()}))
    outcome = {tp: (Errors.NONE, None) if exc is None else api_error(exc) for tp, exc in results.items()}
    elected = [tp for tp, (error, _) in outcome.items() if error == Errors.NONE]

    def respond() -> Response:
        for tp in elected:
            if epoch(tp) <= before.get(tp, -1):
                outcome[tp] = (Errors.REQUEST_TIMED_OUT, None)
        return Response.send(request, _response(outcome))

    if not elected:
        return respond()
    respond_when(services, request, lambda: all(epoch(tp) > before.get(tp, -1) for tp in elected),
                 body.timeout_ms, respond)
    return None
