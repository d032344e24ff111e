"""Kafka's TopicDeletionManager: a topic marked under /admin/delete_topics is deleted once every
replica acknowledged StopReplica(delete=true); replicas on dead brokers make the topic ineligible
until those brokers return."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from coordination.controller.context import ControllerContext, PartitionReplica
from coordination.controller.partition_state_machine import PartitionStateMachine
from coordination.controller.replica_state_machine import ReplicaStateMachine
from coordination.controller.request_batch import ControllerBrokerRequestBatch
from coordination.controller.states import PartitionState, ReplicaState
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import TopicPartition

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        zk_client: KafkaZkClient,
        replica_sm: ReplicaStateMachine,
        partition_sm: PartitionStateMachine,
        batch: ControllerBrokerRequestBatch,
        enabled: bool,
        on_topic_deleted: Callable[[str], None],
    ) -> None:
        self.context = context
        self.zk = zk_client
        self.replica_sm = replica_sm
        self.partition_sm = partition_sm
        self.batch = batch
        self.enabled = enabled
        self._on_topic_deleted = on_topic_deleted

    def enqueue(self, topics: Iterable[str]) -> None:
        if self.enabled:
            self.context.topics_to_be_deleted.update(topics)
            self.resume()

    def mark_ineligible(self, topics: Iterable[str]) -> None:
        if self.enabled:
            self.context.topics_ineligible_for_deletion.update(
                t for t in topics if t in self.context.topics_to_be_deleted
            )

    def retry_on_brokers(self, broker_ids: set[int]) -> None:
        """Brokers came back: their topics become eligible again."""
        topics = {
            r.tp.topic
            for r in self.context.replicas_on_brokers(broker_ids)
            if r.tp.topic in self.context.topics_to_be_deleted
        }
        if topics:
            self.context.topics_ineligible_for_deletion -= topics
            self._retry_ineligible_replicas(topics)
            self.resume()

    def _retry_ineligible_replicas(self, topics: set[str]) -> None:
        failed = [
            r
            for r, state in self.context.replica_states.items()
            if r.tp.topic in topics and state is ReplicaState.DELETION_INELIGIBLE
        ]
        self.replica_sm.handle_state_changes(failed, ReplicaState.OFFLINE)

    def on_stop_replica_response(self, broker_id: int, errors: dict[TopicPartition, int]) -> None:
        failed = [PartitionReplica(tp, broker_id) for tp, code in errors.items() if code != 0]
        succeeded = [PartitionReplica(tp, broker_id) for tp, code in errors.items() if code == 0]
        if failed:
            self.replica_sm.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
            self.mark_ineligible({r.tp.topic for r in failed})
        self.replica_sm.handle_state_changes(
            [r for r in succeeded if self.replica_sm.state(r) is ReplicaState.DELETION_STARTED],
            ReplicaState.DELETION_SUCCESSFUL,
        )
        self.resume()

    def resume(self) -> None:
        for topic in sorted(self.context.topics_to_be_deleted):
            replicas = self.context.replicas_for_partitions(self.context.partitions_for_topic(topic))
            states = {self.replica_sm.state(r) for r in replicas}
            if not replicas or states == {ReplicaState.DELETION_SUCCESSFUL}:
                self._complete(topic, replicas)
            elif ReplicaState.DELETION_STARTED in states or topic in self.context.topics_ineligible_for_deletion:
                continue
            else:
                self._start(topic, replicas)

    def _start(self, topic: str, replicas: set[PartitionReplica]) -> None:
        log.info("deleting topic %s", topic)
        partitions = self.context.partitions_for_topic(topic)
        # Brokers learn first that the topic is going away (leader -2 in UpdateMetadata).
        self.batch.add_update_metadata(self.context.live_broker_ids, partitions)
        self.batch.send()
        self.partition_sm.handle_state_changes(partitions, PartitionState.OFFLINE)
        live = [r for r in replicas if r.replica in self.context.live_broker_ids]
        dead = [r for r in replicas if r not in live and self.replica_sm.state(r) is not ReplicaState.DELETION_SUCCESSFUL]
        self.replica_sm.handle_state_changes(
            [r for r in replicas if self.replica_sm.state(r) in (ReplicaState.NEW, ReplicaState.ONLINE,
                                                                  ReplicaState.DELETION_INELIGIBLE)],
            ReplicaState.OFFLINE,
        )
        self.replica_sm.handle_state_changes(
            [r for r in live if self.replica_sm.state(r) is ReplicaState.OFFLINE], ReplicaState.DELETION_STARTED
        )
        if dead:
            self.replica_sm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
            self.mark_ineligible([topic])

    def _complete(self, topic: str, replicas: set[PartitionReplica]) -> None:
        self.replica_sm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)
        partitions = self.context.partitions_for_topic(topic)
        self.partition_sm.handle_state_changes(
            [tp for tp in partitions if self.context.partition_states.get(tp) is not PartitionState.OFFLINE],
            PartitionState.OFFLINE,
        )
        self.partition_sm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
        self.zk.delete_topic_znodes(topic, self.context.epoch_zk_version)
        self.zk.delete_topic_deletion_marker(topic, self.context.epoch_zk_version)
        self.context.remove_topic(topic)
        self._on_topic_deleted(topic)
        log.info("deletion of topic %s completed", topic)
