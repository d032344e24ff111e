"""ShareCoordinator: serves the share-group state RPCs for the ``__share_group_state`` partitions
this broker leads (Kafka's ShareCoordinatorService over its shards).

A share-partition's state lives in partition ``abs(hash("group:topicId:partition")) % partitions``
of ``__share_group_state`` (the topic id as Kafka prints it: URL-safe base64). Becoming leader of
a partition replays its log into a shard; until then requests for it are
COORDINATOR_LOAD_IN_PROGRESS, and for a partition led elsewhere NOT_COORDINATOR. Every change is
appended (acks=all) before the shard applies it and the request is answered, so an answered
write survives a failover.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker.coordinator.internal_topic import partition_for, replay_partition_log
from broker.replica_manager import ReplicaManager
from broker.share.share_coordinator_shard import Record, ShareCoordinatorShard, ShareGroupOffset, StateKey
from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import ProtocolError
from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
RunBlocking = Callable[..., Awaitable[Any]]


def kafka_uuid_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey."""
    return f"{group_id}:{kafka_uuid_string(topic_id)}:{partition}"


class ShareCoordinator:
    def __init__(self, replica_manager: ReplicaManager, run_blocking: RunBlocking, partitions: Callable[[], int],
                 snapshot_every: int, write_timeout_ms: int, load_buffer_size: int = 5 * 1024 * 1024) -> None:
        self.replica_manager = replica_manager
        self.run_blocking = run_blocking
        self._partitions = partitions
        self.snapshot_every = snapshot_every
        self.write_timeout_ms = write_timeout_ms
        self.load_buffer_size = load_buffer_size
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self.loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._locks: dict[int, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def partition_for(self, state_key: StateKey) -> int:
        return partition_for(coordinator_key(*state_key), self._partitions())

    # --- leadership ----------------------------------------------------------------------------

    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        if topic != SHARE_GROUP_STATE_TOPIC:
            return
        if not is_leader:
            self.shards.pop(partition, None)
            self.loading.pop(partition, None)
            return
        if partition in self.shards or self.loading.get(partition) == leader_epoch:
            return
        self.loading[partition] = leader_epoch
        task = asyncio.get_running_loop().create_task(self._load(partition, leader_epoch),
                                                      name=f"share-state-load-{partition}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load(self, partition: int, leader_epoch: int) -> None:
        shard = ShareCoordinatorShard(self.snapshot_every)
        start = time.monotonic()
        try:
            tp = self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, partition)
            if tp is None or tp.log is None:
                raise KafkaApiError(Errors.NOT_LEADER_OR_FOLLOWER)
            await self.run_blocking(replay_partition_log, tp.log, self.load_buffer_size,
                                    lambda buf: _replay(shard, buf))
        except (KafkaApiError, ProtocolError, OSError) as exc:
            log.error("Error loading share-group state from %s-%d: %s", SHARE_GROUP_STATE_TOPIC, partition, exc)
            if self.loading.get(partition) == leader_epoch:  # not a newer epoch's load, still running
                del self.loading[partition]
            return
        if self.loading.get(partition) != leader_epoch:
            return  # leadership moved meanwhile
        del self.loading[partition]
        self.shards[partition] = shard
        log.info("Loaded share-group state of %d share-partitions from %s-%d in %.0f ms", len(shard.state),
                 SHARE_GROUP_STATE_TOPIC, partition, (time.monotonic() - start) * 1000)

    def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()

    # --- the state RPCs ------------------------------------------------------------------------

    def _shard(self, state_key: StateKey) -> tuple[int, ShareCoordinatorShard]:
        partition = self.partition_for(state_key)
        if partition in self.loading:
            raise KafkaApiError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        shard = self.shards.get(partition)
        if shard is None:
            raise KafkaApiError(Errors.NOT_COORDINATOR)
        return partition, shard

    def read(self, state_key: StateKey) -> ShareGroupOffset | None:
        return self._shard(state_key)[1].read(state_key)

    async def write(self, state_key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[Any]) -> Errors:
        return await self._change(state_key, lambda shard: shard.write(
            state_key, state_epoch, leader_epoch, start_offset, batches, _now_ms()))

    async def initialize(self, state_key: StateKey, state_epoch: int, start_offset: int) -> Errors:
        return await self._change(state_key, lambda shard: shard.initialize(
            state_key, state_epoch, start_offset, _now_ms()))

    async def delete(self, state_key: StateKey) -> Errors:
        return await self._change(state_key, lambda shard: shard.delete(state_key))

    async def _change(self, state_key: StateKey,
                      change: Callable[[ShareCoordinatorShard], tuple[Errors, list[Record]]]) -> Errors:
        partition, _shard = self._shard(state_key)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:  # one change at a time per partition: records land in the order they were made
            partition, shard = self._shard(state_key)
            error, entries = change(shard)
            if error is not Errors.NONE or not entries:
                return error
            builder = RecordBatchBuilder()
            now = _now_ms()
            for key, value in entries:
                builder.append(now, key, value)
            info = await self.replica_manager.append_and_wait(SHARE_GROUP_STATE_TOPIC, partition, builder.build(),
                                                              self.write_timeout_ms, AppendOrigin.COORDINATOR)
            if self.shards.get(partition) is shard:
                before = shard.redundant_offset()
                for offset, (key, value) in enumerate(entries, info.first_offset):
                    shard.replay(key, value, offset)
                if shard.redundant_offset() > before:
                    await self._prune(partition, shard.redundant_offset())
        return Errors.NONE

    async def _prune(self, partition: int, offset: int) -> None:
        """Drop the records no share-partition needs any more (followers follow the log start)."""
        try:
            _leader, tp_log = self.replica_manager.leader_partition_and_log(SHARE_GROUP_STATE_TOPIC, partition)
            await self.run_blocking(tp_log.maybe_increment_log_start_offset, min(offset, tp_log.high_watermark))
        except KafkaApiError as exc:
            log.debug("Not pruning %s-%d: %s", SHARE_GROUP_STATE_TOPIC, partition, exc.error.name)


def _replay(shard: ShareCoordinatorShard, buf: bytes) -> None:
    for pos, header in iter_log_entries(buf):
        if header.is_control:
            continue
        for record in decode_entry_records(buf, pos):
            if record.key is not None:
                shard.replay(bytes(record.key), None if record.value is None else bytes(record.value), record.offset)


def _now_ms() -> int:
    return int(time.time() * 1000)
