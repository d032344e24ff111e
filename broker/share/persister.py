"""The share-group state persister (Kafka's DefaultStatePersister): a share-partition leader reads
and writes its state through the share coordinator that owns it, with the share-group state RPCs.

The coordinator is the leader of the share-partition's ``__share_group_state`` partition (the
topic is created on first need); requests go over the inter-broker listener, to this broker too,
so one path serves every layout. NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE and connection failures are retried until ``timeout_ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.network.network_client import NETWORK_ERRORS, NetworkClients
from broker.security.client_security import PLAINTEXT, ClientSecurity
from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, coordinator_key
from broker.share.share_partition import RecordState, StateBatch
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from broker.coordinator.internal_topic import partition_for

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

RETRIABLE = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
                       Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT, Errors.NOT_ENOUGH_REPLICAS,
                       Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND})
RETRY_BACKOFF_S = 0.1
# Kafka's persister writes WriteShareGroupState v0 too; v1 adds DeliveryCompleteCount (-1: unknown).
WRITE_VERSION = 1


@dataclass(frozen=True)
class PersistedState:
    state_epoch: int
    start_offset: int  # -1: never initialized
    batches: list[StateBatch]


class Persister:
    def __init__(self, metadata_cache: MetadataCache, listener: str, create_topic: Callable[[], Awaitable[None]],
                 timeout_ms: int, security: ClientSecurity = PLAINTEXT) -> None:
        self.metadata_cache = metadata_cache
        self.listener = listener
        self._create_topic = create_topic
        self.timeout_ms = timeout_ms
        # Loads and writes of many share-partitions run at once: one connection per coordinator,
        # one exchange at a time on it.
        self._clients = NetworkClients("share-group-state-persister", timeout_ms / 1000, security)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        R = ReadShareGroupStateRequest
        body = R(group_id=group_id, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        result = (await self._send(group_id, topic_id, partition, body, ApiKey.READ_SHARE_GROUP_STATE, 0))
        found = result.results[0].partitions[0]
        if found.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION:  # nothing stored yet
            return PersistedState(0, -1, [])
        _raise(found.error_code)
        return PersistedState(found.state_epoch, found.start_offset, [
            StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
            for b in found.state_batches])

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch]) -> None:
        R = WriteShareGroupStateRequest
        body = R(group_id=group_id, topics=[R.WriteStateData(topic_id=topic_id, partitions=[R.PartitionData(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=int(b.delivery_state), delivery_count=b.delivery_count)
                           for b in batches])])])
        result = await self._send(group_id, topic_id, partition, body, ApiKey.WRITE_SHARE_GROUP_STATE, WRITE_VERSION)
        _raise(result.results[0].partitions[0].error_code)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """(start offset, leader epoch) of a share-partition; (-1, -1) if nothing is stored."""
        R = ReadShareGroupStateSummaryRequest
        body = R(group_id=group_id, topics=[R.ReadStateSummaryData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition, leader_epoch=-1)])])
        result = await self._send(group_id, topic_id, partition, body, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0)
        found = result.results[0].partitions[0]
        if found.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
            return -1, -1
        _raise(found.error_code)
        return found.start_offset, found.leader_epoch

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> None:
        """Start a share-partition over at ``start_offset`` with a newer state epoch, which fences
        the writes of a leader still holding the old state (it reloads)."""
        R = InitializeShareGroupStateRequest
        state = await self.read(group_id, topic_id, partition, -1)
        body = R(group_id=group_id, topics=[R.InitializeStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition, state_epoch=state.state_epoch + 1, start_offset=start_offset)])])
        result = await self._send(group_id, topic_id, partition, body, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0)
        _raise(result.results[0].partitions[0].error_code)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        R = DeleteShareGroupStateRequest
        body = R(group_id=group_id, topics=[R.DeleteStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition)])])
        result = await self._send(group_id, topic_id, partition, body, ApiKey.DELETE_SHARE_GROUP_STATE, 0)
        _raise(result.results[0].partitions[0].error_code)

    async def _send(self, group_id: str, topic_id: uuid.UUID, partition: int, body: Any, api_key: ApiKey,
                    version: int) -> Any:
        deadline = time.monotonic() + self.timeout_ms / 1000
        key = coordinator_key(group_id, topic_id, partition)
        while True:
            error = Errors.COORDINATOR_NOT_AVAILABLE
            endpoint = await self._coordinator(key)
            if endpoint is not None:
                try:
                    response = await self._clients.send(endpoint, endpoint, body, int(api_key), version)
                except NETWORK_ERRORS as exc:
                    log.debug("%s to %s failed: %s", api_key.name, endpoint, exc)
                else:
                    error = Errors(response.results[0].partitions[0].error_code) if response.results else Errors.NONE
                    if error not in RETRIABLE:
                        return response
            if time.monotonic() >= deadline:  # still unavailable: what Kafka's persister reports then
                raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _coordinator(self, key: str) -> tuple[str, int] | None:
        cache = self.metadata_cache
        count = len(cache.topic_partitions(SHARE_GROUP_STATE_TOPIC))
        if not count:
            await self._create_topic()
            return None
        state = cache.partition(SHARE_GROUP_STATE_TOPIC, partition_for(key, count))
        if state is None or state.leader < 0:
            return None
        return cache.broker_endpoint(state.leader, self.listener)


def _raise(error_code: int) -> None:
    if error_code:
        raise KafkaApiError(Errors(error_code))
