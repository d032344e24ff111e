"""AlterPartitionManager: sends a leader's ISR changes to the controller (KIP-497).

As a Kafka 3.9 broker does: AlterPartition v3 by topic id (v1 by name while a topic id is unknown).

Leaders propose; the controller decides, writes ZooKeeper and broadcasts UpdateMetadata.
Proposals made while a request is in flight are sent together in the next one, and a
partition has at most one proposal outstanding (the Partition's ``pending_isr``). When the
controller cannot be reached, the proposal is dropped: the partition's next ISR check (a
follower fetch or the periodic shrink check) proposes again from the current state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.network.network_client import NETWORK_ERRORS, NetworkClient
from broker.security.client_security import PLAINTEXT, ClientSecurity
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AlterPartitionRequest

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.partition import Partition

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 3  # what IBP 3.9 sends: topic ids, ISR members with (unknown) broker epochs
ALTER_PARTITION_VERSION_BY_NAME = 1  # Kafka's fallback while a partition's topic id is unknown
UNKNOWN_BROKER_EPOCH = -1  # a ZooKeeper-mode leader does not know its followers' epochs
TopicPartition = tuple[str, int]


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], metadata_cache: MetadataCache,
                 listener_name: str, timeout_s: float, on_change: Callable[[Partition, list[int]], None],
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.on_change = on_change  # called after an accepted change: the high watermark may move
        self._client = NetworkClient(f"broker-{broker_id}-alter-partition", timeout_s, security)
        self._queued: dict[TopicPartition, Partition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition-sender")

    def submit(self, partition: Partition, new_isr: list[int]) -> None:
        """Propose ``new_isr`` for a led partition (a no-op while one is already in flight)."""
        if partition.pending_isr is not None:
            return
        partition.pending_isr = list(new_isr)
        self._queued[(partition.topic, partition.partition)] = partition
        self._wakeup.set()
        log.info("Proposing ISR %s (was %s) for %s-%d at leader epoch %d", new_isr, partition.isr,
                 partition.topic, partition.partition, partition.leader_epoch)

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = {tp: p for tp, p in self._queued.items() if p.pending_isr is not None}  # not reset meanwhile
            self._queued = {}
            if not batch:
                continue
            try:
                await self._send(batch)
            except Exception:  # noqa: BLE001 - the sender must outlive any one answer
                # A dead sender would leave every proposal pending for good: no ISR of a partition
                # whose leader epoch stays the same could change again.
                log.exception("Unexpected error sending AlterPartition for %d partitions; they will be "
                              "proposed again", len(batch))
                for partition in batch.values():
                    partition.pending_isr = None

    async def _send(self, batch: dict[TopicPartition, Partition]) -> None:
        by_id = all(p.topic_id is not None for p in batch.values())
        version = ALTER_PARTITION_VERSION if by_id else ALTER_PARTITION_VERSION_BY_NAME
        request = self._request(batch, by_id)
        endpoint = self._controller_endpoint()
        try:
            if endpoint is None:
                raise OSError("no controller is known yet")
            response = await self._client.send(endpoint, request, ApiKey.ALTER_PARTITION, version)
        except NETWORK_ERRORS as exc:
            log.warning("AlterPartition to the controller failed (%s); the ISR change will be proposed again", exc)
            for partition in batch.values():
                partition.pending_isr = None
            return
        if response.error_code:
            log.warning("The controller refused AlterPartition: %s", Errors(response.error_code).name)
        answered: set[TopicPartition] = set()
        names = {p.topic_id: p.topic for p in batch.values()}
        for topic in response.topics:
            name = names.get(topic.topic_id, "") if by_id else topic.topic_name
            for p in topic.partitions:
                tp = (name, p.partition_index)
                partition = batch.get(tp)
                if partition is None:
                    continue
                answered.add(tp)
                if p.error_code:
                    partition.pending_isr = None
                    log.info("ISR change for %s-%d refused: %s", tp[0], tp[1], Errors(p.error_code).name)
                else:
                    previous_isr = partition.isr
                    if partition.apply_isr_change(p.leader_epoch, list(p.isr), p.partition_epoch):
                        log.info("ISR of %s-%d is now %s (partition epoch %d)", tp[0], tp[1], list(p.isr),
                                 p.partition_epoch)
                        self.on_change(partition, previous_isr)
        for tp in batch.keys() - answered:
            batch[tp].pending_isr = None

    def _request(self, batch: dict[TopicPartition, Partition], by_id: bool) -> AlterPartitionRequest:
        topics: dict[str, list[AlterPartitionRequest.PartitionData]] = {}
        for (topic, index), partition in batch.items():
            assert partition.pending_isr is not None
            entry = AlterPartitionRequest.PartitionData(
                partition_index=index, leader_epoch=partition.leader_epoch, leader_recovery_state=0,
                partition_epoch=partition.partition_epoch)
            if by_id:
                entry.new_isr_with_epochs = [AlterPartitionRequest.BrokerState(
                    broker_id=b, broker_epoch=UNKNOWN_BROKER_EPOCH) for b in partition.pending_isr]
            else:
                entry.new_isr = partition.pending_isr
            topics.setdefault(topic, []).append(entry)
        topic_ids = {p.topic: p.topic_id for p in batch.values()}
        return AlterPartitionRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch(), topics=[
            AlterPartitionRequest.TopicData(topic_id=topic_ids[name], partitions=parts) if by_id
            else AlterPartitionRequest.TopicData(topic_name=name, partitions=parts) for name, parts in topics.items()])

    def _controller_endpoint(self) -> tuple[str, int] | None:
        controller = self.metadata_cache.controller_id
        if controller is None:
            return None
        return self.metadata_cache.broker_endpoint(controller, self.listener_name)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._client.close()
