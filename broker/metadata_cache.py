"""MetadataCache: this broker's view of the cluster, filled by the controller's UpdateMetadata.

As in Kafka's ZkMetadataCache, each UpdateMetadata replaces the live brokers and upserts the
partition states it carries (a partition whose leader is LeaderDuringDelete is removed).
Everything here runs on the broker's event loop, so the maps need no locking.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from protocol.schema import ZERO_UUID

T = TypeVar("T")

LEADER_DURING_DELETE = -2
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerNode:
    broker_id: int
    rack: str | None
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)


@dataclass(slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_id: int | None = None
        self.brokers: dict[int, BrokerNode] = {}
        self.partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        # What memoized() answers from: a stamp per topic and one for the live brokers, moved by
        # every UpdateMetadata that carries the topic or changes the brokers, and one moved by each.
        self._stamps = itertools.count(1)
        self.stamp = 0
        self.topic_stamps: dict[str, int] = {}
        self.brokers_stamp = 0
        self._answers: dict[str | None, dict[Hashable, tuple[tuple[int, int], Any]]] = {}

    def update_metadata(self, request: Any) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata request (v5+); returns the partitions deleted by it."""
        self.stamp = next(self._stamps)
        self.controller_id = request.controller_id if request.controller_id >= 0 else None
        brokers = {
            b.id: BrokerNode(b.id, b.rack, {ep.listener: (ep.host, ep.port) for ep in b.endpoints})
            for b in request.live_brokers
        }
        if brokers != self.brokers:
            self.brokers = brokers
            self.brokers_stamp = next(self._stamps)
        deleted: list[tuple[str, int]] = []
        for topic_state in request.topic_states:
            topic = topic_state.topic_name
            self.topic_stamps[topic] = next(self._stamps)
            if topic_state.topic_id != ZERO_UUID:
                self.topic_ids[topic] = topic_state.topic_id
                self.topic_names[topic_state.topic_id] = topic
            for p in topic_state.partition_states:
                if p.leader == LEADER_DURING_DELETE:
                    self._remove_partition(topic, p.partition_index)
                    deleted.append((topic, p.partition_index))
                    continue
                self.partitions.setdefault(topic, {})[p.partition_index] = PartitionMetadata(
                    topic, p.partition_index, p.controller_epoch, p.leader, p.leader_epoch, list(p.isr),
                    p.zk_version, list(p.replicas), list(p.offline_replicas),
                )
        return deleted

    def _remove_partition(self, topic: str, partition: int) -> None:
        parts = self.partitions.get(topic)
        if parts is None:
            self.topic_stamps.pop(topic, None)
            return
        parts.pop(partition, None)
        if not parts:
            del self.partitions[topic]
            self.topic_stamps.pop(topic, None)
            self._answers.pop(topic, None)
            topic_id = self.topic_ids.pop(topic, None)
            if topic_id is not None:
                self.topic_names.pop(topic_id, None)

    def memoized(self, topic: str | None, variant: Hashable, build: Callable[[], T]) -> T:
        """``build()``'s answer about ``topic`` (one per ``variant``), built again only once an
        UpdateMetadata has changed the topic or the live brokers: Metadata of every topic of a
        broker with 10,000 partitions rebuilt them all for each request. ``topic`` None: an
        answer about the whole cache, built again after any UpdateMetadata."""
        stamp = (self.stamp, 0) if topic is None else (self.brokers_stamp, self.topic_stamps.get(topic, 0))
        answers = self._answers.setdefault(topic, {})
        found = answers.get(variant)
        if found is not None and found[0] == stamp:
            return found[1]  # type: ignore[no-any-return]
        answer = build()
        answers[variant] = (stamp, answer)
        return answer

    # --- queries ----------------------------------------------------------------------------
    def contains_topic(self, topic: str) -> bool:
        return topic in self.partitions

    def all_topics(self) -> list[str]:
        return sorted(self.partitions)

    def topic_partitions(self, topic: str) -> dict[int, PartitionMetadata]:
        return self.partitions.get(topic, {})

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self.partitions.get(topic, {}).get(partition)

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.topic_ids.get(topic, ZERO_UUID)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)

    def alive_brokers(self, listener: str) -> list[tuple[BrokerNode, str, int]]:
        """Brokers reachable on ``listener``, with their host and port there, by id."""
        out = []
        for broker_id in sorted(self.brokers):
            node = self.brokers[broker_id]
            endpoint = node.endpoints.get(listener)
            if endpoint is not None:
                out.append((node, endpoint[0], endpoint[1]))
        return out

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def current_leader(self, topic: str, partition: int, listener: str
                       ) -> tuple[int, int, tuple[int, str, int, str | None] | None]:
        """(leader id, leader epoch, (id, host, port, rack) of the leader on ``listener`` or None), for
        the new-leader hints of Produce v10+ and Fetch v12+ (KIP-951); (-1, -1, None) if unknown."""
        state = self.partition(topic, partition)
        if state is None or state.leader < 0:
            return -1, -1, None
        node = self.brokers.get(state.leader)
        endpoint = node.endpoints.get(listener) if node is not None else None
        if node is None or endpoint is None:
            return state.leader, state.leader_epoch, None
        return state.leader, state.leader_epoch, (node.broker_id, endpoint[0], endpoint[1], node.rack)

    def broker_endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        node = self.brokers.get(broker_id)
        return None if node is None else node.endpoints.get(listener)
