"""Kafka's (Zk)ReplicaStateMachine: the lifecycle of each replica (NewReplica, OnlineReplica,
OfflineReplica, ReplicaDeletionStarted/Successful/Ineligible, NonExistentReplica) and the requests
each transition sends."""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from coordination.controller.context import ControllerContext, PartitionReplica
from coordination.controller.request_batch import ControllerBrokerRequestBatch
from coordination.controller.states import ReplicaState, is_valid_replica_transition
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition

log = logging.getLogger(__name__)


class ReplicaStateMachine:
    def __init__(self, context: ControllerContext, zk_client: KafkaZkClient, batch: ControllerBrokerRequestBatch) -> None:
        self.context = context
        self.zk = zk_client
        self.batch = batch

    def startup(self) -> None:
        online = []
        for tp in self.context.all_partitions():
            for replica in self.context.replicas(tp):
                key = PartitionReplica(tp, replica)
                if self.context.is_replica_online(replica):
                    self.context.replica_states[key] = ReplicaState.ONLINE
                    online.append(key)
                else:
                    self.context.replica_states[key] = ReplicaState.DELETION_INELIGIBLE
        self.handle_state_changes(online, ReplicaState.ONLINE)

    def state(self, replica: PartitionReplica) -> ReplicaState:
        return self.context.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        replicas = list(replicas)
        if not replicas:
            return
        by_broker: dict[int, list[PartitionReplica]] = {}
        for replica in replicas:
            by_broker.setdefault(replica.replica, []).append(replica)
        for broker_id, broker_replicas in sorted(by_broker.items()):
            self._do_state_changes(broker_id, broker_replicas, target)
        self.batch.send()

    def _do_state_changes(self, broker_id: int, replicas: list[PartitionReplica], target: ReplicaState) -> None:
        valid = []
        for replica in replicas:
            current = self.state(replica)
            if is_valid_replica_transition(current, target):
                valid.append(replica)
            else:
                log.error(
                    "replica %d of %s can't move from %s to %s", broker_id, replica.tp, current.value, target.value
                )
        if target is ReplicaState.NEW:
            for replica in valid:
                state = self.context.leadership.get(replica.tp)
                if state is not None:
                    if state.leader_and_isr.leader == broker_id:
                        log.error("replica %d is the leader of %s; it can't be a new replica", broker_id, replica.tp)
                        continue
                    self.batch.add_leader_and_isr([broker_id], replica.tp, state, is_new=True)
                self.context.replica_states[replica] = ReplicaState.NEW
        elif target is ReplicaState.ONLINE:
            for replica in valid:
                if self.state(replica) is ReplicaState.NEW:
                    assignment = self.context.assignment(replica.tp)
                    if assignment is not None and broker_id not in assignment.replicas:
                        log.error("replica %d is not assigned to %s", broker_id, replica.tp)
                else:
                    state = self.context.leadership.get(replica.tp)
                    if state is not None:
                        self.batch.add_leader_and_isr([broker_id], replica.tp, state, is_new=False)
                self.context.replica_states[replica] = ReplicaState.ONLINE
        elif target is ReplicaState.OFFLINE:
            for replica in valid:
                self.batch.add_stop_replica([broker_id], replica.tp, delete=False)
            updated = self._remove_replica_from_isr(broker_id, [r.tp for r in valid])
            for tp, state in updated.items():
                if not self.context.is_topic_queued_for_deletion(tp.topic):
                    others = [
                        r for r in self.context.replicas(tp) if r != broker_id and r in self.context.live_broker_ids
                    ]
                    self.batch.add_leader_and_isr(others, tp, state, is_new=False)
            for replica in valid:
                self.context.replica_states[replica] = ReplicaState.OFFLINE
        elif target is ReplicaState.DELETION_STARTED:
            for replica in valid:
                self.batch.add_stop_replica([broker_id], replica.tp, delete=True)
                self.context.replica_states[replica] = ReplicaState.DELETION_STARTED
        elif target in (ReplicaState.DELETION_INELIGIBLE, ReplicaState.DELETION_SUCCESSFUL):
            for replica in valid:
                self.context.replica_states[replica] = target
        else:  # NON_EXISTENT: drop the replica from the assignment
            for replica in valid:
                assignment = self.context.assignment(replica.tp)
                if assignment is not None:
                    self.context.set_assignment(
                        replica.tp,
                        replace(assignment, replicas=tuple(r for r in assignment.replicas if r != broker_id)),
                    )
                self.context.replica_states.pop(replica, None)

    def _remove_replica_from_isr(
        self, broker_id: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take an offline replica out of the ISR (and leadership) of `partitions` in ZooKeeper."""
        updated: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = partitions
        while remaining:
            current = self.zk.get_partition_states(remaining)
            proposals: dict[TopicPartition, LeaderAndIsr] = {}
            for tp, state in current.items():
                lai = state.leader_and_isr
                if broker_id not in lai.isr:
                    continue
                # The last ISR member is kept so that a clean election stays possible when it returns.
                isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != broker_id)
                leader = NO_LEADER if lai.leader == broker_id else lai.leader
                proposals[tp] = lai.new_leader_and_isr(leader, isr)
            if not proposals:
                break
            result = self.zk.update_leader_and_isr(proposals, self.context.epoch, self.context.epoch_zk_version)
            for tp, outcome in result.finished.items():
                if isinstance(outcome, Exception):
                    log.error("could not remove replica %d from the ISR of %s: %r", broker_id, tp, outcome)
                    continue
                state = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
                self.context.leadership[tp] = state
                updated[tp] = state
            remaining = result.to_retry
        return updated
