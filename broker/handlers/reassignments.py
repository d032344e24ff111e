"""AlterPartitionReassignments (v0) and ListPartitionReassignments (v0), handled by the
controller's ReassignmentManager (KIP-455); other brokers answer NOT_CONTROLLER."""
from __future__ import annotations

from collections import defaultdict

from broker.errors import api_error
from broker.admin.waiting import controller_result
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.errors import NotControllerError
from coordination.model import TopicPartition
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AlterPartitionReassignmentsResponse, ListPartitionReassignmentsResponse

AlterTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AlterPartition = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
ListPartition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    targets = {
        TopicPartition(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
        for t in body.topics
        for p in t.partitions
    }
    try:
        results = await controller_result(services.controller.alter_partition_reassignments(targets))
    except NotControllerError:
        return Response.send(request, AlterPartitionReassignmentsResponse(error_code=int(Errors.NOT_CONTROLLER)))
    by_topic: dict[str, list[AlterPartition]] = defaultdict(list)
    for tp in targets:
        error, message = (Errors.NONE, None) if results.get(tp) is None else api_error(results[tp])
        by_topic[tp.topic].append(
            AlterPartition(partition_index=tp.partition, error_code=int(error), error_message=message)
        )
    return Response.send(request, AlterPartitionReassignmentsResponse(
        responses=[AlterTopic(name=topic, partitions=partitions) for topic, partitions in by_topic.items()]
    ))


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle_list_partition_reassignments(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    partitions = None if body.topics is None else {
        TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes
    }
    try:
        ongoing = await controller_result(services.controller.list_partition_reassignments(partitions))
    except NotControllerError:
        return Response.send(request, ListPartitionReassignmentsResponse(error_code=int(Errors.NOT_CONTROLLER)))
    by_topic: dict[str, list[ListPartition]] = defaultdict(list)
    for tp in sorted(ongoing):
        assignment = ongoing[tp]
        by_topic[tp.topic].append(ListPartition(
            partition_index=tp.partition, replicas=list(assignment.replicas),
            adding_replicas=list(assignment.adding_replicas), removing_replicas=list(assignment.removing_replicas),
        ))
    return Response.send(request, ListPartitionReassignmentsResponse(
        topics=[ListTopic(name=topic, partitions=ps) for topic, ps in by_topic.items()]
    ))
