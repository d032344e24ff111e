"""AlterPartition (controller side): ISR changes proposed by partition leaders."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.model import LeaderAndIsr, LeaderRecoveryState, TopicPartition
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import AlterPartitionResponse
from protocol.schema import ZERO_UUID


def _error_code(result: Any) -> int:
    if isinstance(result, Exception):
        return int(Errors[getattr(result, "kafka_error", "UNKNOWN_SERVER_ERROR")])
    return 0


def _recovery_state(value: int) -> LeaderRecoveryState:
    try:
        return LeaderRecoveryState(value)
    except ValueError:
        # Kafka's controller fails the whole request on an unknown state (IllegalArgumentException).
        raise KafkaApiError(Errors.UNKNOWN_SERVER_ERROR, f"unknown leader recovery state {value}") from None


@handles(ApiKey.ALTER_PARTITION)
async def handle_alter_partition(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    controller = services.controller
    controller.require_active()
    cache = services.metadata_cache
    proposals: dict[TopicPartition, LeaderAndIsr] = {}
    unknown: list[tuple[Any, Any]] = []
    for topic in body.topics:
        name = topic.topic_name if version < 2 else cache.topic_name(topic.topic_id)
        for p in topic.partitions:
            if name is None:
                unknown.append((topic, p))
                continue
            isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
            proposals[TopicPartition(name, p.partition_index)] = LeaderAndIsr(
                body.broker_id, p.leader_epoch, tuple(isr), _recovery_state(p.leader_recovery_state),
                p.partition_epoch)
    results = await asyncio.wrap_future(controller.alter_partition(body.broker_id, body.broker_epoch, proposals))
    topics: dict[str, list[Any]] = {}
    for tp, result in results.items():
        entry = AlterPartitionResponse.PartitionData(partition_index=tp.partition, error_code=_error_code(result))
        if not isinstance(result, Exception):
            entry.leader_id = result.leader
            entry.leader_epoch = result.leader_epoch
            entry.isr = list(result.isr)
            entry.leader_recovery_state = int(result.leader_recovery_state)
            entry.partition_epoch = result.partition_epoch
        topics.setdefault(tp.topic, []).append(entry)
    out = [AlterPartitionResponse.TopicData(topic_name=name, topic_id=cache.topic_id(name), partitions=parts)
           for name, parts in topics.items()]
    for topic, p in unknown:
        out.append(AlterPartitionResponse.TopicData(topic_id=topic.topic_id or ZERO_UUID, partitions=[
            AlterPartitionResponse.PartitionData(partition_index=p.partition_index,
                                                 error_code=int(Errors.UNKNOWN_TOPIC_ID))]))
    return Response.send(request, AlterPartitionResponse(error_code=0, topics=out))
