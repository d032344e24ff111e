"""What the controller does for each event (Kafka's KafkaController.process cases). All of it runs
on the controller event thread."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from coordination.controller.context import PartitionReplica
from coordination.controller.election import ElectionStrategy
from coordination.controller.feature_updates import update_features
from coordination.controller.states import PartitionState, ReplicaState
from coordination.errors import CoordinationError, MalformedZnodeError
from coordination.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState, TopicPartition
from coordination.zk_admin_data import decode_log_dir_event, decode_partition_set, decode_preferred_replica_election
from coordination.zk_data import (
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    broker_id_path,
    delete_topic_path,
)

if TYPE_CHECKING:
    from coordination.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)

KAFKA_STORAGE_ERROR = 56
_SERVING = (ReplicaState.NEW, ReplicaState.ONLINE)
_DELETION_PENDING = (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED)


class ApiError(CoordinationError):
    """A per-partition API error; `kafka_error` is set per instance."""

    def __init__(self, kafka_error: str, message: str) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


def handlers(controller: KafkaController) -> dict[str, Callable[..., Any]]:
    events = ControllerEvents(controller)
    return {
        "startup": controller.elect,
        "controller_change": events.controller_change,
        "register_and_reelect": events.register_and_reelect,
        "expire": events.expire,
        "resign": controller.resign,
        "broker_change": events.active_only(events.broker_change),
        "broker_modification": events.active_only(events.broker_modification),
        "topic_change": events.active_only(events.topic_change),
        "partition_modification": events.active_only(events.partition_modification),
        "topic_deletion": events.active_only(events.topic_deletion),
        "stop_replica_response": events.active_only(events.stop_replica_response),
        "preferred_replica_election": events.active_only(events.preferred_replica_election_znode),
        "isr_change_notification": events.active_only(events.isr_change_notification),
        "log_dir_event_notification": events.active_only(events.log_dir_event_notification),
        "leader_and_isr_response": events.active_only(events.leader_and_isr_response),
        "auto_leader_rebalance": events.active_only(events.auto_leader_rebalance),
        "topic_unclean_leader_election_enable": events.active_only(
            lambda topic: controller.partition_sm.trigger_online_partition_state_change(topic)),
        "zk_reassignment": events.active_only(lambda: controller.reassignment.zk_reassignment()),
        "reassignment_isr_change": events.active_only(lambda tp: controller.reassignment.on_isr_change(tp)),
        "alter_partition_reassignments": events.api(lambda targets: controller.reassignment.alter(targets)),
        "list_partition_reassignments": events.api(lambda partitions: controller.reassignment.list(partitions)),
        "elect_leaders": events.api(events.elect_leaders),
        "controlled_shutdown": events.api(events.controlled_shutdown),
        "alter_partition": events.api(events.alter_partition),
        "update_features": events.api(lambda updates: update_features(controller.zk, updates)),
    }


class ControllerEvents:
    def __init__(self, controller: KafkaController) -> None:
        self.c = controller

    @property
    def ctx(self) -> Any:
        return self.c.context

    def active_only(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Watch-driven events are ignored unless this broker is the active controller."""

        def run(*args: Any) -> Any:
            return fn(*args) if self.c.is_active else None

        return run

    def api(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            self.c.require_active()
            return fn(*args)

        return run

    # --- election and session --------------------------------------------------------------------

    def controller_change(self) -> None:
        """/controller was created, changed or deleted: resign if someone else is named, elect if
        nobody is (Kafka's ControllerChange + Reelect)."""
        self.c.elect()

    def register_and_reelect(self) -> None:
        self.c.elect()

    def expire(self) -> None:
        self.c.resign()
        self.c.active_controller_id = -1

    # --- brokers -----------------------------------------------------------------------------------

    def broker_change(self) -> None:
        ids = set(self.c.zk.get_broker_ids(watch=True))
        current = self.ctx.live_brokers
        fresh = {}
        for broker_id in ids:
            self.c.watch_broker(broker_id)
            info = self.c.read_broker(broker_id)
            if info is not None:
                fresh[broker_id] = info
        new = {b for b in fresh if b not in current}
        dead = {b for b in current if b not in fresh}
        bounced = {b for b in fresh if b in current and fresh[b].epoch != current[b].epoch}
        for broker_id in dead | bounced:
            if broker_id in dead:
                self.c.zk.zk.unregister_znode_handler(broker_id_path(broker_id))
            self.c.channel.remove_broker(broker_id)
            del current[broker_id]
        if dead | bounced:
            self.on_broker_failure(dead | bounced)
        for broker_id in new | bounced:
            current[broker_id] = fresh[broker_id]
            self.c.channel.add_broker(fresh[broker_id])
        if new | bounced:
            self.on_broker_startup(new | bounced)

    def broker_modification(self, broker_id: int) -> None:
        info = self.c.read_broker(broker_id)
        old = self.ctx.live_brokers.get(broker_id)
        if info is None or old is None or (info.endpoints, info.rack) == (old.endpoints, old.rack):
            return
        self.ctx.live_brokers[broker_id] = info
        self.c.batch.add_update_metadata(self.ctx.live_broker_ids, [])
        self.c.batch.send()

    def on_broker_startup(self, new: set[int]) -> None:
        log.info("controller %d: brokers %s started", self.c.broker_id, sorted(new))
        self.ctx.shutting_down_broker_ids -= new
        for broker_id in new:
            self.ctx.replicas_on_offline_dirs.pop(broker_id, None)
        batch = self.c.batch
        batch.add_update_metadata(self.ctx.live_broker_ids - new, [])
        batch.add_update_metadata(new, self.ctx.all_partitions())
        batch.send()
        replicas = [
            r for r in self.ctx.replicas_on_brokers(new) if not self.ctx.is_topic_queued_for_deletion(r.tp.topic)
        ]
        self.c.replica_sm.handle_state_changes(replicas, ReplicaState.ONLINE)
        self.c.partition_sm.trigger_online_partition_state_change()
        self.c.deletion.retry_on_brokers(new)

    def on_broker_failure(self, dead: set[int]) -> None:
        log.info("controller %d: brokers %s failed", self.c.broker_id, sorted(dead))
        self.ctx.shutting_down_broker_ids -= dead
        for broker_id in dead:
            self.ctx.replicas_on_offline_dirs.pop(broker_id, None)
        self.on_replicas_become_offline(self.ctx.replicas_on_brokers(dead))

    def on_replicas_become_offline(self, replicas: set[PartitionReplica]) -> None:
        """Replicas lost with their broker or log dir: move leadership away, shrink ISRs."""
        deleting = [r for r in replicas if self.ctx.is_topic_queued_for_deletion(r.tp.topic)]
        others = [r for r in replicas if r not in deleting]
        offline_leaders = [
            tp
            for tp in {r.tp for r in others}
            if tp in self.ctx.leadership
            and not self.ctx.is_replica_online(self.ctx.leadership[tp].leader_and_isr.leader, tp)
        ]
        self.c.partition_sm.handle_state_changes(offline_leaders, PartitionState.OFFLINE)
        self.c.partition_sm.trigger_online_partition_state_change()
        self.c.replica_sm.handle_state_changes(others, ReplicaState.OFFLINE)
        if deleting:
            self.c.replica_sm.handle_state_changes(
                [r for r in deleting if self.c.replica_sm.state(r) in _SERVING], ReplicaState.OFFLINE
            )
            self.c.replica_sm.handle_state_changes(
                [r for r in deleting if self.c.replica_sm.state(r) in _DELETION_PENDING],
                ReplicaState.DELETION_INELIGIBLE,
            )
            self.c.deletion.mark_ineligible({r.tp.topic for r in deleting})
        if not offline_leaders:
            self.c.batch.add_update_metadata(self.ctx.live_broker_ids, [])
            self.c.batch.send()

    def log_dir_event_notification(self) -> None:
        """A broker's log dir failed: send it LeaderAndIsr for all its replicas; it answers
        KAFKA_STORAGE_ERROR for those on the failed dir (handled in leader_and_isr_response)."""
        brokers: set[int] = set()
        for child in self.c.zk.get_children(LOG_DIR_EVENT_NOTIFICATION_PATH, watch=True):
            path = f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{child}"
            data, version = self.c.zk.get_data(path)
            if version >= 0:
                try:
                    brokers.add(decode_log_dir_event(path, data))
                except MalformedZnodeError as exc:
                    log.error("ignoring log dir event: %s", exc)
            self.c.zk.delete_fenced(path, self.ctx.epoch_zk_version)
        live = brokers & self.ctx.live_broker_ids
        if live:
            log.info("controller %d: log dir failure on brokers %s", self.c.broker_id, sorted(live))
            replicas = [
                r for r in self.ctx.replicas_on_brokers(live)
                if not self.ctx.is_topic_queued_for_deletion(r.tp.topic)
                and self.c.replica_sm.state(r) is ReplicaState.ONLINE
            ]
            self.c.replica_sm.handle_state_changes(replicas, ReplicaState.ONLINE)

    def leader_and_isr_response(self, broker_id: int, errors: dict[TopicPartition, int]) -> None:
        failed = {tp for tp, code in errors.items() if code == KAFKA_STORAGE_ERROR}
        known = self.ctx.replicas_on_offline_dirs.setdefault(broker_id, set())
        new = failed - known
        if broker_id not in self.ctx.live_brokers or not new:
            return
        known |= new
        self.on_replicas_become_offline({PartitionReplica(tp, broker_id) for tp in new})

    # --- topics ------------------------------------------------------------------------------------

    def topic_change(self) -> None:
        topics = self.c.zk.get_all_topics(watch=True)
        new = topics - self.ctx.all_topics
        for topic in self.ctx.all_topics - topics:
            self.ctx.remove_topic(topic)
            self.c.forget_topic(topic)
        self.ctx.all_topics = set(topics)
        added = self.c.refresh_topics(sorted(new))
        self.ctx.leadership.update(self.c.zk.get_partition_states(added))
        self.c.on_new_partition_creation([tp for tp in added if tp not in self.ctx.leadership])

    def partition_modification(self, topic: str) -> None:
        if topic not in self.ctx.all_topics:
            return
        if self.ctx.is_topic_queued_for_deletion(topic):
            log.info("ignoring partition change of topic %s: it is being deleted", topic)
            return
        added = self.c.refresh_topic(topic)
        self.c.on_new_partition_creation(added)

    def topic_deletion(self) -> None:
        marked = self.c.zk.get_topic_deletions(watch=True)
        unknown = {t for t in marked if t not in self.ctx.all_topics}
        for topic in unknown:
            self.c.zk.delete_fenced(delete_topic_path(topic), self.ctx.epoch_zk_version)
        marked -= unknown
        if not marked:
            return
        if not self.c.config.delete_topic_enable:
            log.info("delete.topic.enable is false: removing deletion marks of %s", sorted(marked))
            for topic in marked:
                self.c.zk.delete_fenced(delete_topic_path(topic), self.ctx.epoch_zk_version)
            return
        self.c.deletion.enqueue(marked)

    def stop_replica_response(self, broker_id: int, errors: dict[TopicPartition, int]) -> None:
        self.c.deletion.on_stop_replica_response(broker_id, errors)

    # --- leader elections --------------------------------------------------------------------------

    def preferred_replica_election_znode(self) -> None:
        data, version = self.c.zk.get_data(PREFERRED_REPLICA_ELECTION_PATH, watch=True)
        if version < 0:
            return
        try:
            partitions = decode_preferred_replica_election(data)
        except MalformedZnodeError as exc:
            log.error("ignoring preferred replica election request: %s", exc)
            partitions = set()
        self.elect_preferred(partitions)
        self.c.zk.delete_fenced(PREFERRED_REPLICA_ELECTION_PATH, self.ctx.epoch_zk_version)

    def elect_preferred(self, partitions: set[TopicPartition]) -> dict[TopicPartition, Any]:
        eligible = [
            tp
            for tp in partitions
            if tp in self.ctx.leadership and not self.ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        return self.c.partition_sm.handle_state_changes(eligible, PartitionState.ONLINE, ElectionStrategy.PREFERRED)

    def elect_leaders(self, partitions: set[TopicPartition] | None, unclean: bool) -> dict[TopicPartition, Exception | None]:
        """ElectLeaders: None per partition on success, else the error (Kafka's error names)."""
        results: dict[TopicPartition, Exception | None] = {}
        candidates = set(self.ctx.leadership) if partitions is None else partitions
        to_elect = []
        for tp in sorted(candidates):
            state = self.ctx.leadership.get(tp)
            if state is None or self.ctx.is_topic_queued_for_deletion(tp.topic):
                results[tp] = ApiError("UNKNOWN_TOPIC_OR_PARTITION", f"The partition {tp} does not exist.")
                continue
            leader = state.leader_and_isr.leader
            if unclean:
                needed = leader not in self.ctx.live_serving_broker_ids
            else:
                needed = leader != self.ctx.replicas(tp)[0]
            if not needed:
                results[tp] = ApiError("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition.")
                continue
            to_elect.append(tp)
        strategy = ElectionStrategy.OFFLINE_ALLOW_UNCLEAN if unclean else ElectionStrategy.PREFERRED
        outcome = self.c.partition_sm.handle_state_changes(to_elect, PartitionState.ONLINE, strategy)
        for tp in to_elect:
            result = outcome.get(tp)
            results[tp] = result if isinstance(result, Exception) else None
        if partitions is None:  # "all partitions" reports only the ones it tried
            results = {tp: r for tp, r in results.items() if tp in to_elect}
        return results

    def auto_leader_rebalance(self) -> None:
        """Move leadership back to preferred replicas on brokers whose imbalance exceeds
        leader.imbalance.per.broker.percentage."""
        try:
            by_preferred: dict[int, list[TopicPartition]] = {}
            for tp in self.ctx.all_partitions():
                replicas = self.ctx.replicas(tp)
                assignment = self.ctx.assignment(tp)
                if replicas and tp in self.ctx.leadership and not (assignment and assignment.is_being_reassigned):
                    by_preferred.setdefault(replicas[0], []).append(tp)
            for broker_id, partitions in sorted(by_preferred.items()):
                if broker_id not in self.ctx.live_serving_broker_ids:
                    continue
                imbalanced = [
                    tp for tp in partitions if self.ctx.leadership[tp].leader_and_isr.leader != broker_id
                ]
                ratio = len(imbalanced) / len(partitions)
                if ratio * 100 > self.c.config.leader_imbalance_per_broker_percentage:
                    eligible = {
                        tp
                        for tp in imbalanced
                        if broker_id in self.ctx.leadership[tp].leader_and_isr.isr
                        and not self.ctx.is_topic_queued_for_deletion(tp.topic)
                    }
                    self.elect_preferred(eligible)
        finally:
            self.c.schedule_next_rebalance()

    # --- requests from brokers ---------------------------------------------------------------------

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move leadership off a broker that is shutting down; returns the partitions it still
        leads (Kafka's response lists them as remaining)."""
        self.c.check_broker_epoch(broker_id, broker_epoch)
        if broker_id not in self.ctx.live_brokers:
            raise ApiError("BROKER_NOT_AVAILABLE", f"broker {broker_id} is not alive")
        self.ctx.shutting_down_broker_ids.add(broker_id)
        partitions = [
            tp
            for tp in sorted(self.ctx.partitions_on_broker(broker_id))
            if len(self.ctx.replicas(tp)) > 1
            and tp in self.ctx.leadership
            and not self.ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        led = [tp for tp in partitions if self.ctx.leadership[tp].leader_and_isr.leader == broker_id]
        followed = [PartitionReplica(tp, broker_id) for tp in partitions if tp not in led]
        self.c.partition_sm.handle_state_changes(led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
        self.c.replica_sm.handle_state_changes(followed, ReplicaState.OFFLINE)
        return {
            tp
            for tp in self.ctx.partitions_on_broker(broker_id)
            if tp in self.ctx.leadership
            and self.ctx.leadership[tp].leader_and_isr.leader == broker_id
            and len(self.ctx.replicas(tp)) > 1
        }

    def alter_partition(
        self, broker_id: int, broker_epoch: int, proposals: dict[TopicPartition, LeaderAndIsr]
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """ISR changes reported by leaders (AlterPartition); accepted ones are written and sent to
        every broker in UpdateMetadata."""
        self.c.check_live_broker_epoch(broker_id, broker_epoch)
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, proposed in proposals.items():
            state = self.ctx.leadership.get(tp)
            if state is None or self.ctx.is_topic_queued_for_deletion(tp.topic):
                results[tp] = ApiError("UNKNOWN_TOPIC_OR_PARTITION", f"unknown partition {tp}")
                continue
            current = state.leader_and_isr
            recovering = LeaderRecoveryState.RECOVERING
            if current.leader != broker_id:
                results[tp] = ApiError("NOT_LEADER_OR_FOLLOWER", f"broker {broker_id} does not lead {tp}")
            elif proposed.leader_epoch != current.leader_epoch:
                results[tp] = ApiError(
                    "FENCED_LEADER_EPOCH",
                    f"leader epoch {proposed.leader_epoch} of {tp} is not the current {current.leader_epoch}",
                )
            elif (proposed.isr, proposed.leader_recovery_state) == (current.isr, current.leader_recovery_state):
                results[tp] = current  # already applied (a retry)
            elif proposed.partition_epoch != current.partition_epoch:
                results[tp] = ApiError("INVALID_UPDATE_VERSION", f"partition epoch of {tp} is not current")
            elif proposed.leader_recovery_state is recovering and (
                len(proposed.isr) > 1 or current.leader_recovery_state is not recovering
            ):
                results[tp] = ApiError("INVALID_REQUEST", f"invalid leader recovery state change for {tp}")
            elif not set(proposed.isr) <= self.ctx.live_serving_broker_ids or not set(proposed.isr) <= set(
                self.ctx.replicas(tp)
            ):
                results[tp] = ApiError("INELIGIBLE_REPLICA", f"ISR {list(proposed.isr)} of {tp} has ineligible replicas")
            else:
                to_write[tp] = replace(current, isr=proposed.isr, leader_recovery_state=proposed.leader_recovery_state)
        written = self.c.zk.update_leader_and_isr(to_write, self.ctx.epoch, self.ctx.epoch_zk_version)
        for tp in written.to_retry:
            results[tp] = ApiError("INVALID_UPDATE_VERSION", f"the state of {tp} changed concurrently")
        for tp, result in written.finished.items():
            results[tp] = result
            if not isinstance(result, Exception):
                self.ctx.leadership[tp] = LeaderIsrAndControllerEpoch(result, self.ctx.epoch)
        updated = [tp for tp, r in written.finished.items() if not isinstance(r, Exception)]
        if updated:
            self.c.batch.add_update_metadata(self.ctx.live_broker_ids, updated)
            self.c.batch.send()
        for tp in updated:
            self.c.reassignment.on_isr_change(tp)
        return results

    def isr_change_notification(self) -> None:
        """Legacy leaders (IBP < 2.7) wrote ISR changes themselves: refresh and broadcast."""
        children = self.c.zk.get_children(ISR_CHANGE_NOTIFICATION_PATH, watch=True)
        changed: set[TopicPartition] = set()
        for child in children:
            path = f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}"
            data, version = self.c.zk.get_data(path)
            if version >= 0:
                try:
                    changed |= decode_partition_set(path, data)
                except MalformedZnodeError as exc:
                    log.error("ignoring ISR change notification: %s", exc)
            self.c.zk.delete_fenced(path, self.ctx.epoch_zk_version)
        known = [tp for tp in changed if tp in self.ctx.leadership]
        self.ctx.leadership.update(self.c.zk.get_partition_states(known))
        if known:
            self.c.batch.add_update_metadata(self.ctx.live_broker_ids, known)
            self.c.batch.send()

