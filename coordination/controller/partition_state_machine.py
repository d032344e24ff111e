"""Kafka's (Zk)PartitionStateMachine: moves partitions between NewPartition, OnlinePartition,
OfflinePartition and NonExistentPartition, electing leaders and writing `state` znodes on the way."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from coordination.controller.context import ControllerContext
from coordination.controller.controller_metrics import ControllerMetrics
from coordination.controller.election import ElectionStrategy, elect_leader
from coordination.controller.request_batch import ControllerBrokerRequestBatch
from coordination.controller.states import PartitionState, is_valid_partition_transition
from coordination.errors import CoordinationError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import (
    INITIAL_LEADER_EPOCH,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)

log = logging.getLogger(__name__)


class StateChangeFailedError(CoordinationError):
    kafka_error = "ELIGIBLE_LEADERS_NOT_AVAILABLE"


class PreferredLeaderNotAvailableError(CoordinationError):
    kafka_error = "PREFERRED_LEADER_NOT_AVAILABLE"


ElectionOutcome = dict[TopicPartition, LeaderAndIsr | Exception]


class PartitionStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        zk_client: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
        unclean_enabled: Callable[[str], bool],
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.context = context
        self.zk = zk_client
        self.batch = batch
        self._unclean_enabled = unclean_enabled
        self._metrics = metrics

    def startup(self) -> None:
        for tp in self.context.all_partitions():
            state = self.context.leadership.get(tp)
            if state is None:
                self.context.partition_states[tp] = PartitionState.NEW
            elif self.context.is_replica_online(state.leader_and_isr.leader, tp):
                self.context.partition_states[tp] = PartitionState.ONLINE
            else:
                self.context.partition_states[tp] = PartitionState.OFFLINE
        self.trigger_online_partition_state_change()

    def trigger_online_partition_state_change(self, topic: str | None = None) -> ElectionOutcome:
        """Bring every New/Offline partition (not queued for deletion) online."""
        partitions = [
            tp
            for tp in self.context.partitions_in_states({PartitionState.NEW, PartitionState.OFFLINE})
            if not self.context.is_topic_queued_for_deletion(tp.topic) and (topic is None or tp.topic == topic)
        ]
        return self.handle_state_changes(partitions, PartitionState.ONLINE, ElectionStrategy.OFFLINE)

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> ElectionOutcome:
        partitions = list(partitions)
        if not partitions:
            return {}
        outcome = self._do_state_changes(partitions, target, strategy)
        self.batch.send()
        return outcome

    def _do_state_changes(
        self, partitions: list[TopicPartition], target: PartitionState, strategy: ElectionStrategy | None
    ) -> ElectionOutcome:
        outcome: ElectionOutcome = {}
        valid = []
        for tp in partitions:
            current = self.context.partition_states.get(tp, PartitionState.NON_EXISTENT)
            if is_valid_partition_transition(current, target):
                valid.append(tp)
            else:
                outcome[tp] = StateChangeFailedError(
                    f"Partition {tp} should be in one of {[s.value for s in (target,)]} previous states "
                    f"to move to {target.value}, but is in {current.value}"
                )
                log.error("%s", outcome[tp])
        if target is PartitionState.NEW:
            for tp in valid:
                self.context.partition_states[tp] = PartitionState.NEW
        elif target is PartitionState.ONLINE:
            new = [tp for tp in valid if self.context.partition_states.get(tp) is PartitionState.NEW]
            new_set = set(new)  # a list here made a 10,000-partition topic's creation quadratic
            others = [tp for tp in valid if tp not in new_set]
            outcome.update(self._initialize_leader_and_isr(new))
            if others:
                outcome.update(self._elect_leaders(others, strategy or ElectionStrategy.OFFLINE))
            for tp, result in outcome.items():
                if not isinstance(result, Exception):
                    self.context.partition_states[tp] = PartitionState.ONLINE
        elif target is PartitionState.OFFLINE:
            for tp in valid:
                self.context.partition_states[tp] = PartitionState.OFFLINE
        else:
            for tp in valid:
                self.context.partition_states.pop(tp, None)
        return outcome

    def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> ElectionOutcome:
        outcome: ElectionOutcome = {}
        to_create: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            live = [r for r in self.context.replicas(tp) if self.context.is_replica_online(r, tp)]
            if not live:
                outcome[tp] = StateChangeFailedError(
                    f"Controller failed to elect a leader for new partition {tp}: no replica is alive "
                    f"(assigned replicas {list(self.context.replicas(tp))})"
                )
                log.error("%s", outcome[tp])
                continue
            to_create[tp] = LeaderAndIsr(leader=live[0], leader_epoch=INITIAL_LEADER_EPOCH, isr=tuple(live))
        created = self.zk.create_partition_states(to_create, self.context.epoch, self.context.epoch_zk_version)
        for tp, result in created.items():
            if isinstance(result, Exception):
                outcome[tp] = StateChangeFailedError(f"could not create the state znode of {tp}: {result!r}")
                log.error("%s", outcome[tp])
                continue
            state = LeaderIsrAndControllerEpoch(result, self.context.epoch)
            self.context.leadership[tp] = state
            self.batch.add_leader_and_isr(
                [r for r in self.context.replicas(tp) if r in self.context.live_broker_ids], tp, state, is_new=True
            )
            outcome[tp] = result
        return outcome

    def _elect_leaders(self, partitions: list[TopicPartition], strategy: ElectionStrategy) -> ElectionOutcome:
        """Elect with fresh state from ZooKeeper, retrying partitions that lost a zkVersion race."""
        outcome: ElectionOutcome = {}
        remaining = partitions
        while remaining:
            current = self.zk.get_partition_states(remaining)
            proposals: dict[TopicPartition, LeaderAndIsr] = {}
            notify: dict[TopicPartition, tuple[int, ...]] = {}
            for tp in remaining:
                state = current.get(tp)
                if state is None:
                    outcome[tp] = StateChangeFailedError(f"partition {tp} has no state znode to elect from")
                    continue
                if state.controller_epoch > self.context.epoch:
                    outcome[tp] = StateChangeFailedError(
                        f"state of {tp} was written by controller epoch {state.controller_epoch}, newer "
                        f"than ours ({self.context.epoch})"
                    )
                    continue
                result = self._elect_one(tp, state.leader_and_isr, strategy)
                if isinstance(result, Exception):
                    outcome[tp] = result
                    continue
                proposals[tp], notify[tp] = result
            written = self.zk.update_leader_and_isr(proposals, self.context.epoch, self.context.epoch_zk_version)
            for tp, result in written.finished.items():
                if isinstance(result, Exception):
                    outcome[tp] = result
                    continue
                state = LeaderIsrAndControllerEpoch(result, self.context.epoch)
                self.context.leadership[tp] = state
                self.batch.add_leader_and_isr(notify[tp], tp, state, is_new=False)
                outcome[tp] = result
            remaining = written.to_retry
        for tp, result in outcome.items():
            if isinstance(result, Exception):
                log.warning("leader election for %s (%s) failed: %s", tp, strategy.value, result)
        return outcome

    def _elect_one(
        self, tp: TopicPartition, current: LeaderAndIsr, strategy: ElectionStrategy
    ) -> tuple[LeaderAndIsr, tuple[int, ...]] | Exception:
        assignment = self.context.assignment(tp)
        replicas = () if assignment is None else assignment.replicas
        unclean = strategy is ElectionStrategy.OFFLINE and self._unclean_enabled(tp.topic)
        result = elect_leader(
            strategy,
            current,
            replicas,
            self.context.online_replicas(tp),
            unclean_enabled=unclean,
            target_replicas=() if assignment is None else assignment.target_replicas,
            shutting_down=self.context.shutting_down_broker_ids,
        )
        if result.leader_and_isr is None:
            if strategy is ElectionStrategy.PREFERRED:
                return PreferredLeaderNotAvailableError(
                    f"Failed to elect leader for partition {tp} under strategy {strategy.value}"
                )
            return StateChangeFailedError(f"Failed to elect leader for partition {tp} under strategy {strategy.value}")
        if self._metrics is not None and result.leader_and_isr.leader not in current.isr:
            self._metrics.unclean_leader_elections += 1  # only an unclean election picks a leader outside the ISR
        return result.leader_and_isr, result.replicas_to_notify
