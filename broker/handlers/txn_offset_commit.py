"""TxnOffsetCommit (v0-4): a transactional producer's offsets for a group, pending until its marker.

Partitions the cluster does not know answer UNKNOWN_TOPIC_OR_PARTITION; the rest go to the group
coordinator (``commit_transactional_offsets``), which verifies the transaction, checks the member
and generation (v3+) and writes them in the producer's transaction. As Kafka does, clients before
v2 get COORDINATOR_NOT_AVAILABLE instead of COORDINATOR_LOAD_IN_PROGRESS, which they do not expect.
"""

from __future__ import annotations

from typing import Any

from broker.add_partitions_to_txn_manager import TransactionSupportedOperation
from broker.coordinator.group.group_metadata import NO_GENERATION, UNKNOWN_MEMBER_ID, OffsetAndMetadata, now_ms
from broker.coordinator.group.group_operations import commit_transactional_offsets
from broker.handlers import handles
from broker.handlers._group_support import every_partition, group_coordinator, respond_later, split_commit
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import TxnOffsetCommitResponse

TopicPartition = tuple[str, int]
R = TxnOffsetCommitResponse
GENERIC_ERROR_MIN_VERSION = 4  # knows TRANSACTION_ABORTABLE
LOAD_IN_PROGRESS_MIN_VERSION = 2


def _response(request: Request, errors: dict[TopicPartition, Errors]) -> Any:
    old_client = request.api_version < LOAD_IN_PROGRESS_MIN_VERSION
    topics = []
    for t in request.body().topics:
        partitions = []
        for p in t.partitions:
            error = errors[(t.name, p.partition_index)]
            if old_client and error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                error = Errors.COORDINATOR_NOT_AVAILABLE
            partitions.append(R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                                 error_code=int(error)))
        topics.append(R.TxnOffsetCommitResponseTopic(name=t.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


def error_response(request: Request, error: Errors) -> Any:
    return _response(request, every_partition(request.body().topics, error))


@handles(ApiKey.TXN_OFFSET_COMMIT, error_response=error_response)
async def handle_txn_offset_commit(services: BrokerServices, request: Request) -> Response | None:
    body = request.body()
    version = request.api_version
    coordinator = group_coordinator(services)
    now = now_ms()
    errors, offsets = split_commit(services, body.topics, lambda p: OffsetAndMetadata(
        p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
        p.committed_metadata if p.committed_metadata is not None else "", now))
    if not offsets:
        return Response.send(request, _response(request, errors))
    operation = TransactionSupportedOperation.GENERIC_ERROR if version >= GENERIC_ERROR_MIN_VERSION \
        else TransactionSupportedOperation.DEFAULT_ERROR

    async def commit() -> dict[TopicPartition, Errors]:
        stored = await commit_transactional_offsets(
            coordinator, body.group_id, body.transactional_id, body.producer_id, body.producer_epoch,
            body.member_id if version >= 3 else UNKNOWN_MEMBER_ID,
            body.group_instance_id if version >= 3 else None,
            body.generation_id if version >= 3 else NO_GENERATION, offsets, operation)
        return {**errors, **stored}

    return respond_later(services, request, commit(), lambda result: _response(request, result))
