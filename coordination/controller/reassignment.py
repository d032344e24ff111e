"""Partition reassignment (KIP-455 on the ZooKeeper controller).

The in-flight state lives in the topic znode's `adding_replicas`/`removing_replicas`, so a new
controller resumes every unfinished reassignment after a failover. Phase A writes the full replica
set (target + origin), bumps the leader epoch and starts the new replicas; once every target
replica is in the ISR (seen through AlterPartition or a watch on the partition's `state` znode),
phase B moves leadership into the target set if needed, stops and deletes the removed replicas and
writes the final assignment. The legacy /admin/reassign_partitions trigger feeds the same path.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from coordination.controller.controller_events import ApiError
from coordination.controller.context import PartitionReplica
from coordination.controller.election import ElectionStrategy
from coordination.controller.states import PartitionState, ReplicaState
from coordination.errors import MalformedZnodeError
from coordination.model import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicAssignment, TopicPartition
from coordination.zk_admin_data import decode_reassignment, encode_reassignment
from coordination.zk_data import REASSIGN_PARTITIONS_PATH, partition_state_path

if TYPE_CHECKING:
    from coordination.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)

Targets = dict[TopicPartition, tuple[int, ...] | None]


class ReassignmentManager:
    def __init__(self, controller: KafkaController) -> None:
        self.c = controller
        self.ctx = controller.context
        self._zk_triggered: set[TopicPartition] = set()

    # --- entry points ------------------------------------------------------------------------------

    def start(self) -> None:
        """On failover: resume reassignments recorded in topic znodes, then the legacy trigger."""
        self.c.zk.zk.register_znode_handler(REASSIGN_PARTITIONS_PATH, lambda _p: self.c.enqueue("zk_reassignment"))
        for tp in self.ctx.all_partitions():
            assignment = self.ctx.assignment(tp)
            if assignment is not None and assignment.is_being_reassigned:
                self._on_reassignment(tp, assignment)
        self.zk_reassignment()

    def stop(self) -> None:
        self.c.zk.zk.unregister_znode_handler(REASSIGN_PARTITIONS_PATH)
        for tp in self.ctx.all_partitions():
            self.c.zk.zk.unregister_znode_handler(partition_state_path(*tp))

    def zk_reassignment(self) -> None:
        data, version = self.c.zk.get_data(REASSIGN_PARTITIONS_PATH, watch=True)
        if version < 0:
            return
        try:
            requested = decode_reassignment(data)
        except MalformedZnodeError as exc:
            log.error("ignoring partition reassignment request: %s", exc)
            self.c.zk.delete_fenced(REASSIGN_PARTITIONS_PATH, self.ctx.epoch_zk_version)
            return
        results = self.trigger(dict(requested))
        self._zk_triggered = {tp for tp, error in results.items() if error is None and self._in_progress(tp)}
        self._update_zk_trigger()

    def alter(self, targets: Targets) -> dict[TopicPartition, ApiError | None]:
        """AlterPartitionReassignments: a replica list starts/changes one, None cancels it."""
        return self.trigger(targets)

    def list(self, partitions: set[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the in-flight ones among `partitions` (all if None)."""
        candidates = self.ctx.all_partitions() if partitions is None else sorted(partitions)
        return {tp: a for tp in candidates if (a := self.ctx.assignment(tp)) is not None and a.is_being_reassigned}

    def on_isr_change(self, tp: TopicPartition) -> None:
        assignment = self.ctx.assignment(tp)
        if assignment is not None and assignment.is_being_reassigned:
            self._watch_state(tp)
            if self._is_complete(tp, assignment):
                self._complete(tp, assignment)

    # --- the reassignment steps --------------------------------------------------------------------

    def trigger(self, targets: Targets) -> dict[TopicPartition, ApiError | None]:
        results: dict[TopicPartition, ApiError | None] = {}
        for tp, target in targets.items():
            current = self.ctx.assignment(tp)
            if current is None or self.ctx.is_topic_queued_for_deletion(tp.topic):
                results[tp] = ApiError("UNKNOWN_TOPIC_OR_PARTITION", f"The partition {tp} does not exist.")
                continue
            if target is None:
                if not current.is_being_reassigned:
                    results[tp] = ApiError("NO_REASSIGNMENT_IN_PROGRESS", f"No reassignment in progress for {tp}.")
                    continue
                target = current.origin_replicas
            error = self._validate(tuple(target))
            if error is not None:
                results[tp] = error
                continue
            self._on_reassignment(tp, ReplicaAssignment.for_reassignment(current.origin_replicas, tuple(target)))
            results[tp] = None
        return results

    def _validate(self, target: tuple[int, ...]) -> ApiError | None:
        if not target:
            return ApiError("INVALID_REPLICA_ASSIGNMENT", "Empty replica list specified in partition reassignment.")
        if len(set(target)) != len(target):
            return ApiError("INVALID_REPLICA_ASSIGNMENT", f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
        if any(r < 0 for r in target):
            return ApiError("INVALID_REPLICA_ASSIGNMENT", f"Invalid broker id in replica list: {list(target)}")
        missing = sorted(set(target) - self.ctx.live_broker_ids)
        if missing:
            return ApiError("INVALID_REPLICA_ASSIGNMENT", f"The proposed assignment contains non-live brokers: {missing}")
        return None

    def _on_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        self._watch_state(tp)
        if self._is_complete(tp, reassignment):
            self._complete(tp, reassignment)
            return
        log.info("reassigning %s: %s", tp, reassignment)
        self._write_assignment(tp, reassignment)
        self._bump_leader_epoch(tp, reassignment.replicas)
        new = [
            PartitionReplica(tp, r)
            for r in reassignment.adding_replicas
            if self.c.replica_sm.state(PartitionReplica(tp, r)) is ReplicaState.NON_EXISTENT
        ]
        self.c.replica_sm.handle_state_changes(new, ReplicaState.NEW)

    def _complete(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        target = reassignment.target_replicas
        self.c.replica_sm.handle_state_changes(
            [PartitionReplica(tp, r) for r in reassignment.adding_replicas], ReplicaState.ONLINE
        )
        self.ctx.set_assignment(tp, ReplicaAssignment(target))
        state = self.ctx.leadership.get(tp)
        leader = -1 if state is None else state.leader_and_isr.leader
        if leader not in target or leader not in self.ctx.live_serving_broker_ids:
            self.c.partition_sm.handle_state_changes([tp], PartitionState.ONLINE, ElectionStrategy.REASSIGNMENT)
        else:
            self._bump_leader_epoch(tp, target)
        removed = [PartitionReplica(tp, r) for r in reassignment.removing_replicas]
        for step in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                     ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
            self.c.replica_sm.handle_state_changes(removed, step)
        self._write_assignment(tp, ReplicaAssignment(target))
        self._zk_triggered.discard(tp)
        self._update_zk_trigger()
        self.c.batch.add_update_metadata(self.ctx.live_broker_ids, [tp])
        self.c.batch.send()
        self.c.zk.zk.unregister_znode_handler(partition_state_path(*tp))
        log.info("reassignment of %s to %s completed", tp, list(target))

    # --- helpers ----------------------------------------------------------------------------------

    def _in_progress(self, tp: TopicPartition) -> bool:
        assignment = self.ctx.assignment(tp)
        return assignment is not None and assignment.is_being_reassigned

    def _watch_state(self, tp: TopicPartition) -> None:
        path = partition_state_path(*tp)
        self.c.zk.zk.register_znode_handler(path, lambda _p: self.c.enqueue("reassignment_isr_change", tp))
        self.c.zk.get_data(path, watch=True)

    def _is_complete(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> bool:
        state = self.c.zk.get_partition_states([tp]).get(tp)
        return state is not None and set(reassignment.target_replicas) <= set(state.leader_and_isr.isr)

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.ctx.set_assignment(tp, assignment)
        partitions = {p.partition: self.ctx.assignment(p) for p in self.ctx.partitions_for_topic(tp.topic)}
        self.c.zk.set_topic_assignment_fenced(
            tp.topic,
            TopicAssignment(self.ctx.topic_ids.get(tp.topic), partitions),  # type: ignore[arg-type]
            self.ctx.epoch_zk_version,
        )

    def _bump_leader_epoch(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        """Tell every replica about the new replica set with a new leader epoch."""
        current = self.c.zk.get_partition_states([tp]).get(tp)
        if current is None:
            return
        written = self.c.zk.update_leader_and_isr(
            {tp: current.leader_and_isr.new_epoch()}, self.ctx.epoch, self.ctx.epoch_zk_version
        )
        result = written.finished.get(tp)
        if result is None or isinstance(result, Exception):
            log.warning("could not bump the leader epoch of %s: %r", tp, result)
            return
        state = LeaderIsrAndControllerEpoch(result, self.ctx.epoch)
        self.ctx.leadership[tp] = state
        self.c.batch.add_leader_and_isr([r for r in replicas if r in self.ctx.live_broker_ids], tp, state, is_new=False)
        self.c.batch.send()

    def _update_zk_trigger(self) -> None:
        """Keep /admin/reassign_partitions listing only its unfinished partitions; delete it when done."""
        data, version = self.c.zk.get_data(REASSIGN_PARTITIONS_PATH)
        if version < 0:
            return
        try:
            requested = decode_reassignment(data)
        except MalformedZnodeError:
            requested = {}
        remaining = {tp: r for tp, r in requested.items() if tp in self._zk_triggered}
        if not remaining:
            self.c.zk.delete_fenced(REASSIGN_PARTITIONS_PATH, self.ctx.epoch_zk_version)
        elif remaining != requested:
            self.c.zk.zk.set_data(REASSIGN_PARTITIONS_PATH, encode_reassignment(remaining), version)

