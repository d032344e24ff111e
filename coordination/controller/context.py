"""The controller's in-memory view of the cluster (Kafka's ControllerContext). Only the controller
event thread touches it."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from coordination.controller.states import PartitionState, ReplicaState
from coordination.model import BrokerInfo, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition


@dataclass(frozen=True)
class PartitionReplica:
    tp: TopicPartition
    replica: int


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)

    def reset(self) -> None:
        """Forget everything (on resignation)."""
        self.__init__()  # type: ignore[misc]

    # --- brokers -----------------------------------------------------------------------------------

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_serving_broker_ids(self) -> set[int]:
        """Live brokers that are not in controlled shutdown (eligible leaders)."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def broker_epoch(self, broker_id: int) -> int:
        info = self.live_brokers.get(broker_id)
        return -1 if info is None else info.epoch

    def is_replica_online(self, broker_id: int, tp: TopicPartition | None = None) -> bool:
        """Live, not shutting down, and (for `tp`) not on a failed log dir of that broker."""
        if broker_id not in self.live_serving_broker_ids:
            return False
        return tp is None or tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def online_replicas(self, tp: TopicPartition) -> set[int]:
        return {r for r in self.replicas(tp) if self.is_replica_online(r, tp)}

    # --- topics and partitions ---------------------------------------------------------------------

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp.topic, {}).get(tp.partition)
        return () if assignment is None else assignment.replicas

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment | None:
        return self.assignments.get(tp.topic, {}).get(tp.partition)

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for topic in sorted(self.assignments) for tp in self.partitions_for_topic(topic)]

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp in self.all_partitions() if broker_id in self.replicas(tp)}

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionReplica]:
        ids = set(broker_ids)
        return {
            PartitionReplica(tp, replica)
            for tp in self.all_partitions()
            for replica in self.replicas(tp)
            if replica in ids
        }

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> set[PartitionReplica]:
        return {PartitionReplica(tp, replica) for tp in partitions for replica in self.replicas(tp)}

    def partitions_led_by(self, broker_ids: set[int]) -> set[TopicPartition]:
        return {tp for tp, state in self.leadership.items() if state.leader_and_isr.leader in broker_ids}

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def remove_topic(self, topic: str) -> None:
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for tp in self.partitions_for_topic(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
        self.assignments.pop(topic, None)
        self.replica_states = {k: v for k, v in self.replica_states.items() if k.tp.topic != topic}
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def partitions_in_states(self, states: set[PartitionState]) -> list[TopicPartition]:
        return [tp for tp, state in self.partition_states.items() if state in states]
