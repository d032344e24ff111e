"""GroupCoordinator: the classic group protocol (Kafka's GroupCoordinator).

Everything runs on the broker's event loop. Kafka's delayed operations become asyncio timers:
the join wait (DelayedJoin / InitialDelayedJoin: completes once every member rejoined or the
rebalance timeout passes), the sync wait (DelayedSync: members that never sent SyncGroup are
removed), per-member session expiry (DelayedHeartbeat) and the expiry of pending members that
got MEMBER_ID_REQUIRED. JoinGroup and SyncGroup answer through futures the handlers await
without holding a request handler.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.coordinator.consumer import consumer_group_records as consumer_records
from broker.coordinator.group.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
    now_ms,
)
from broker.coordinator.group.group_metadata_manager import (
    GROUP_METADATA_TOPIC,
    GroupConfig,
    GroupMetadataManager,
    RunBlocking,
)
from protocol import consumer_offsets_records as records
from protocol.errors import Errors

if TYPE_CHECKING:
    from broker.coordinator.consumer.classic_members import ClassicMemberOperations
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
S = GroupState


@dataclass
class _JoinWait:
    """Kafka's DelayedJoin (initial=False) or InitialDelayedJoin (initial=True) of one group."""

    group: GroupMetadata
    initial: bool
    remaining_ms: int
    timer: asyncio.TimerHandle | None = None


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


DEAD_GROUP = GroupSummary(S.DEAD.value, "", "", [])
EMPTY_SUMMARY = GroupSummary("", "", "", [])
OffsetFetchEntry = tuple[int, int, str, Errors]  # offset, leader epoch, metadata, error


class GroupCoordinator:
    def __init__(self, broker_id: int, config: GroupConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, run_blocking: RunBlocking) -> None:
        self.config = config
        self.manager = GroupMetadataManager(broker_id, config, replica_manager, metadata_cache, run_blocking)
        self.active = False
        self._join_waits: dict[str, _JoinWait] = {}
        self._sync_timers: dict[str, tuple[GroupMetadata, asyncio.TimerHandle]] = {}
        self._pending_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        # Told of every group loaded or unloaded with a __consumer_offsets partition (the KIP-848
        # coordinator keeps the timers of the consumer groups among them).
        self.group_loaded_listeners: list[Callable[[GroupMetadata], None]] = []
        self.group_unloaded_listeners: list[Callable[[GroupMetadata], None]] = []
        # Serves classic members of KIP-848 consumer groups (online migration); None without them.
        self.mixed_groups: ClassicMemberOperations | None = None

    # --- metrics ----------------------------------------------------------------------------------
    def delayed_heartbeats(self) -> int:
        """Kafka's Heartbeat purgatory: a member session or pending member join awaited."""
        return len(self._pending_timers) + sum(
            1 for group in self.manager.current_groups() for member in group.members.values()
            if member.heartbeat_timer is not None)

    def delayed_rebalances(self) -> int:
        """Kafka's Rebalance purgatory: joins (initial or not) and syncs awaited, one a group."""
        return len(self._join_waits) + len(self._sync_timers)

    # --- lifecycle --------------------------------------------------------------------------------
    def startup(self) -> None:
        self.active = True
        self._spawn(self._expire_offsets_periodically())
        log.info("Group coordinator started")

    def shutdown(self) -> None:
        self.active = False
        for partition in sorted(self.manager.owned_partitions | set(self.manager.loading_partitions)):
            self.manager.unload_partition(partition, self._on_group_unloaded)
        for task in list(self._tasks):
            task.cancel()
        log.info("Group coordinator shut down")

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _expire_offsets_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            self.track(self.manager.expire_offsets())

    def track(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Keep background appends referenced until done (and cancellable at shutdown)."""
        for task in tasks:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """ReplicaManager leadership listener: load or unload one ``__consumer_offsets`` partition."""
        if topic != GROUP_METADATA_TOPIC or not self.active:
            return
        manager = self.manager
        if is_leader:
            if manager.is_partition_owned(partition) or partition in manager.loading_partitions:
                return
            log.info("Scheduling loading of offsets and group metadata from %s-%d for epoch %d",
                     topic, partition, leader_epoch)
            manager.loading_partitions[partition] = leader_epoch
            self._spawn(manager.load_partition(partition, leader_epoch, self._on_group_loaded))
        elif manager.is_partition_owned(partition) or partition in manager.loading_partitions:
            log.info("Unloading group metadata of %s-%d for epoch %d", topic, partition, leader_epoch)
            manager.unload_partition(partition, self._on_group_unloaded)

    def on_transaction_completed(self, producer_id: int, offsets_partitions: list[int], is_commit: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` is on these ``__consumer_offsets`` partitions
        (Kafka's scheduleHandleTxnCompletion; here on the loop, before WriteTxnMarkers answers)."""
        self.manager.handle_txn_completion(producer_id, offsets_partitions, is_commit)

    def classic_group_tombstone(self, group_id: str) -> tuple[bytes, None]:
        """The record deleting a classic group's metadata (when it becomes a consumer group)."""
        return records.encode_key(records.GroupMetadataKey(group_id)), None

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        for listener in self.group_loaded_listeners:
            listener(group)
        log.info("Loading group metadata for %s with generation %d", group.group_id, group.generation_id)
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, f"Freshly-loaded group is over capacity ({self.config.max_size})")

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        for listener in self.group_unloaded_listeners:
            listener(group)
        previous = group.state
        group.transition_to(S.DEAD)
        self._cancel_join_wait(group)
        self._cancel_sync_timer(group)
        for key in [k for k in self._pending_timers if k[0] == group.group_id]:
            self._pending_timers.pop(key).cancel()
        for member in group.members.values():
            member.cancel_heartbeat()
            if previous is S.PREPARING_REBALANCE:
                group.maybe_invoke_join(member, JoinGroupResult(member.member_id, Errors.NOT_COORDINATOR))
            elif previous in (S.STABLE, S.COMPLETING_REBALANCE):
                group.maybe_invoke_sync(member, SyncGroupResult(Errors.NOT_COORDINATOR))

    # --- validation ---------------------------------------------------------------------------------
    def validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> Errors | None:
        if group_id is None or (not group_id and not allow_empty_id):
            return Errors.INVALID_GROUP_ID
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_coordinator_for_group(group_id):
            return Errors.NOT_COORDINATOR
        return None

    # --- JoinGroup ------------------------------------------------------------------------------------
    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, support_skip_assignment: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None = None) -> asyncio.Future[JoinGroupResult]:
        future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()

        def fail(error: Errors, answered_id: str = UNKNOWN_MEMBER_ID) -> asyncio.Future[JoinGroupResult]:
            future.set_result(JoinGroupResult(answered_id, error))
            return future

        error = self.validate_group_status(group_id)
        if error is not None:
            return fail(error)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return fail(Errors.INVALID_SESSION_TIMEOUT)
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_group(group_id)
        if group is None:
            if not is_unknown:
                return fail(Errors.UNKNOWN_MEMBER_ID)
            group = self.manager.add_group(GroupMetadata(group_id))
        if group.is_in(S.DEAD):
            return fail(Errors.COORDINATOR_NOT_AVAILABLE)
        if group.consumer_group is not None:
            if not group.consumer_group.is_empty:
                if self.mixed_groups is None:
                    return fail(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
                join = self.mixed_groups.join(group.consumer_group, member_id, group_instance_id, require_known_member_id,
                                              client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                              protocol_type, protocols)
                return asyncio.ensure_future(join)
            self._drop_consumer_group(group)
        if not self._accept_joining_member(group, member_id):
            if group.remove(member_id) is not None and group.is_in(S.PREPARING_REBALANCE):
                self._try_complete_join(group)
            return fail(Errors.GROUP_MAX_SIZE_REACHED)
        join = (future, group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, reason or "")
        if not group.supports_protocols(protocol_type, protocols):
            return fail(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if is_unknown:
            self._new_member_join(group, require_known_member_id, support_skip_assignment, *join)
        else:
            self._current_member_join(group, member_id, *join)
        if group.is_in(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return future

    def hand_over_to_consumer_group(self, group: GroupMetadata) -> None:
        """The classic membership ends because the group became a consumer group (an online upgrade):
        its members carry on in the consumer group, so they are dropped here without a rebalance."""
        self._cancel_join_wait(group)
        self._cancel_sync_timer(group)
        for member in group.members.values():
            member.cancel_heartbeat()
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync_members.clear()
        group.leader_id = None
        group.state = S.EMPTY  # not a rebalance: the classic state machine starts over
        group.state_timestamp = now_ms()

    def adopt_downgraded_group(self, group: GroupMetadata, members: list[MemberMetadata], generation_id: int) -> None:
        """A consumer group of classic members only becomes a classic group (an online downgrade): the
        members keep their partitions and the group rebalances at once, the classic way."""
        group.generation_id = generation_id
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        for member in members:
            group.add(member)
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
            self._schedule_heartbeat(group, member)
        group.protocol_name = group.select_protocol()
        self._prepare_rebalance(group, "The group was converted from a consumer group to a classic group")

    def _drop_consumer_group(self, group: GroupMetadata) -> None:
        """An empty KIP-848 group becomes a classic one on a classic join (its offsets stay)."""
        consumer = group.consumer_group
        assert consumer is not None
        group.consumer_group = None
        consumer.mark_dead()
        log.info("Converted the empty consumer group %s to a classic group", group.group_id)
        self._spawn(self.manager.append_records(group.group_id, consumer_records.group_tombstones(consumer)))

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) \
                or group.num_awaiting_join() < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def _new_member_join(self, group: GroupMetadata, require_known_member_id: bool, support_skip: bool,
                         future: asyncio.Future[JoinGroupResult], group_instance_id: str | None, client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], reason: str) -> None:
        new_member_id = f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"
        old_member_id = group.static_member_id(group_instance_id)
        if group_instance_id is not None and old_member_id is not None and not group.is_in(S.EMPTY):
            self._update_static_member_and_rebalance(group, future, old_member_id, new_member_id, group_instance_id,
                                                     protocols, rebalance_timeout_ms, session_timeout_ms,
                                                     support_skip, reason)
        elif group_instance_id is None and require_known_member_id:
            group.pending_members.add(new_member_id)
            self._schedule_pending_expiry(group, new_member_id, session_timeout_ms)
            future.set_result(JoinGroupResult(new_member_id, Errors.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, future, new_member_id, group_instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason)

    def _current_member_join(self, group: GroupMetadata, member_id: str, future: asyncio.Future[JoinGroupResult],
                             group_instance_id: str | None, client_id: str, client_host: str,
                             rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]], reason: str) -> None:
        if member_id in group.pending_members:
            timer = self._pending_timers.pop((group.group_id, member_id), None)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, future, member_id, group_instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason)
            return
        if group.is_static_member_fenced(group_instance_id, member_id):
            future.set_result(JoinGroupResult(member_id, Errors.FENCED_INSTANCE_ID))
            return
        if not group.has(member_id) or (group_instance_id is not None
                                        and group.static_member_id(group_instance_id) is None):
            future.set_result(JoinGroupResult(member_id, Errors.UNKNOWN_MEMBER_ID))
            return
        member = group.get(member_id)
        update = (group, member, future, protocols, rebalance_timeout_ms, session_timeout_ms, reason)
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(*update)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(protocols):  # a retried JoinGroup: answer with the current generation
                future.set_result(self._join_result(group, member.member_id))
            else:
                self._update_member_and_rebalance(*update)
        elif group.is_in(S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member_and_rebalance(*update)
            else:
                future.set_result(self._join_result(group, member.member_id, with_members=False))
        else:
            future.set_result(JoinGroupResult(member_id, Errors.UNKNOWN_MEMBER_ID))

    def _join_result(self, group: GroupMetadata, member_id: str, with_members: bool = True) -> JoinGroupResult:
        members = group.current_member_metadata() if with_members and group.is_leader(member_id) else []
        return JoinGroupResult(member_id, Errors.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                               group.leader_id or "", members)

    def _add_member_and_rebalance(self, group: GroupMetadata, future: asyncio.Future[JoinGroupResult], member_id: str,
                                  group_instance_id: str | None, client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]], reason: str) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_in(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        # A new member cannot heartbeat before its first JoinGroup answer: expire it if it never comes back.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id} with group instance id "
                                             f"{group_instance_id}; client reason: {reason}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     future: asyncio.Future[JoinGroupResult], protocols: list[tuple[str, bytes]],
                                     rebalance_timeout_ms: int, session_timeout_ms: int, reason: str) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        self._maybe_prepare_rebalance(group, f"Updating metadata for member {member.member_id} during "
                                             f"{group.state.value}; client reason: {reason}")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, future: asyncio.Future[JoinGroupResult],
                                            old_member_id: str, new_member_id: str, group_instance_id: str,
                                            protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                            session_timeout_ms: int, support_skip: bool, reason: str) -> None:
        """A known static member rejoined: it takes a new member id and, in a Stable group whose
        protocol does not change, keeps its assignment without a rebalance."""
        current_leader = group.leader_id
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        if group.is_in(S.STABLE):
            if group.protocol_name == group.select_protocol():
                log.info("Static member %s of group %s with unknown member id rejoins; no rebalance needed",
                         group_instance_id, group.group_id)
                self._spawn(self._store_rejoined_static_member(group, member, old_member_id, group_instance_id, old,
                                                               current_leader, support_skip))
            else:
                self._maybe_prepare_rebalance(group, f"Group's selectedProtocol will change because static member "
                                                     f"{new_member_id} with instance id {group_instance_id} joined "
                                                     f"with change of protocol; client reason: {reason}")
        elif group.is_in(S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"Updating metadata for static member {new_member_id} with "
                                                 f"instance id {group_instance_id}; client reason: {reason}")

    async def _store_rejoined_static_member(self, group: GroupMetadata, member: MemberMetadata, old_member_id: str,
                                            group_instance_id: str, old: tuple[list[tuple[str, bytes]], int, int],
                                            current_leader: str | None, support_skip: bool) -> None:
        new_member_id = member.member_id
        error = await self.manager.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        if error is not Errors.NONE:
            future, member.awaiting_join = member.awaiting_join, None
            if group.members.get(new_member_id) is member:
                group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
            if future is not None and not future.done():
                future.set_result(JoinGroupResult(UNKNOWN_MEMBER_ID, error))
            return
        if support_skip:  # KIP-814: a rejoining static leader learns the members but skips the assignment
            is_leader = group.is_leader(new_member_id)
            result = JoinGroupResult(new_member_id, Errors.NONE, group.generation_id, group.protocol_type,
                                     group.protocol_name, group.leader_id or "",
                                     group.current_member_metadata() if is_leader else [], skip_assignment=is_leader)
        else:  # the old leader id, so that the member does not compute a new assignment
            result = JoinGroupResult(new_member_id, Errors.NONE, group.generation_id, group.protocol_type,
                                     group.protocol_name, current_leader or "")
        group.maybe_invoke_join(member, result)

    # --- rebalance machinery -----------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        initial = group.is_in(S.EMPTY)
        rebalance_timeout = group.rebalance_timeout_ms()
        group.transition_to(S.PREPARING_REBALANCE)
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
                 group.group_id, group.generation_id, reason)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_join_wait(group, True, delay, max(rebalance_timeout - delay, 0))
        else:
            self._schedule_join_wait(group, False, rebalance_timeout, 0)
            self._try_complete_join(group)

    def _schedule_join_wait(self, group: GroupMetadata, initial: bool, delay_ms: int, remaining_ms: int) -> None:
        self._cancel_join_wait(group)
        wait = self._join_waits[group.group_id] = _JoinWait(group, initial, remaining_ms)
        wait.timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_join_wait_expired, wait, delay_ms)

    def _cancel_join_wait(self, group: GroupMetadata) -> None:
        wait = self._join_waits.get(group.group_id)
        if wait is not None and wait.group is group:
            del self._join_waits[group.group_id]
            if wait.timer is not None:
                wait.timer.cancel()

    def _try_complete_join(self, group: GroupMetadata) -> None:
        wait = self._join_waits.get(group.group_id)
        if wait is not None and wait.group is group and not wait.initial and group.has_all_members_joined():
            self._cancel_join_wait(group)
            self._on_complete_join(group)

    def _on_join_wait_expired(self, wait: _JoinWait, delay_ms: int) -> None:
        group = wait.group
        if self._join_waits.get(group.group_id) is not wait:
            return
        del self._join_waits[group.group_id]
        if wait.initial and group.new_member_added and wait.remaining_ms != 0:
            group.new_member_added = False  # new members keep arriving: wait a little longer
            delay = min(self.config.initial_rebalance_delay_ms, wait.remaining_ms)
            self._schedule_join_wait(group, True, delay, max(wait.remaining_ms - delay_ms, 0))
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in [m for m in group.not_yet_rejoined() if not m.is_static]:
            log.info("Group %s removes member %s which has not rejoined", group.group_id, member.member_id)
            group.remove(member.member_id)
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule_join_wait(group, False, group.rebalance_timeout_ms(), 0)
            return
        group.init_next_generation()
        if group.is_in(S.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self._spawn(self._store_empty_group(group))
            return
        log.info("Stabilized group %s generation %d with %d members", group.group_id, group.generation_id,
                 group.size)
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_sync_timer(group)

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self.manager.store_group(group, {})
        if error is not Errors.NONE:
            log.warning("Failed to write empty metadata for group %s: %s", group.group_id, error.name)

    def _schedule_sync_timer(self, group: GroupMetadata) -> None:
        self._cancel_sync_timer(group)
        handle = asyncio.get_running_loop().call_later(group.rebalance_timeout_ms() / 1000,
                                                       self._on_sync_expired, group, group.generation_id)
        self._sync_timers[group.group_id] = (group, handle)

    def _cancel_sync_timer(self, group: GroupMetadata) -> None:
        entry = self._sync_timers.get(group.group_id)
        if entry is not None and entry[0] is group:
            del self._sync_timers[group.group_id]
            entry[1].cancel()

    def _on_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        entry = self._sync_timers.get(group.group_id)
        if entry is None or entry[0] is not group:
            return
        del self._sync_timers[group.group_id]
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.generation_id == generation \
                and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            log.info("Group %s removed members who haven't sent their sync requests: %s", group.group_id, missing)
            for member_id in missing:
                group.remove(member_id)
            self._maybe_prepare_rebalance(group, f"Removing {missing} on pending sync request expiration")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: Errors) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: Errors) -> None:
        ok = error is Errors.NONE
        for member in list(group.members.values()):
            result = SyncGroupResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                                     member.assignment)
            if group.maybe_invoke_sync(member, result):
                self._schedule_heartbeat(group, member)

    # --- session expiry --------------------------------------------------------------------------------
    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        member.cancel_heartbeat()
        delay = (member.session_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        member.heartbeat_timer = asyncio.get_running_loop().call_later(delay, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_in(S.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            self._schedule_heartbeat(group, member)  # waiting in a rebalance counts as alive
            return
        log.info("Member %s in group %s has failed, removing it from the group", member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member, "removing member on heartbeat expiration")

    def _schedule_pending_expiry(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        key = (group.group_id, member_id)
        self._pending_timers[key] = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._on_pending_expired, group, member_id)

    def _on_pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._pending_timers.pop((group.group_id, member_id), None)
        self._remove_pending_member(group, member_id)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        timer = self._pending_timers.pop((group.group_id, member_id), None)
        if timer is not None:
            timer.cancel()
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.is_in(S.PREPARING_REBALANCE):
                self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        group.maybe_invoke_join(member, JoinGroupResult(member.member_id, Errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # --- SyncGroup -------------------------------------------------------------------------------------
    def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                   protocol_name: str | None, group_instance_id: str | None,
                   assignments: dict[str, bytes]) -> asyncio.Future[SyncGroupResult]:
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        error = self.validate_group_status(group_id)
        if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the load: make the member rejoin (older clients do not
            # expect COORDINATOR_LOAD_IN_PROGRESS here).
            error = Errors.REBALANCE_IN_PROGRESS
        group = self.manager.get_group(group_id) if error is None else None
        if error is None and group is None:
            error = Errors.UNKNOWN_MEMBER_ID
        if error is None and group is not None and group.consumer_group is not None and self.mixed_groups is not None:
            future.set_result(self.mixed_groups.sync(group.consumer_group, member_id, group_instance_id,
                                                     generation_id, protocol_type, protocol_name))
            return future
        if error is None:
            assert group is not None
            error = self._sync_error(group, generation_id, member_id, protocol_type, protocol_name, group_instance_id)
        if error is not None:
            future.set_result(SyncGroupResult(error))
            return future
        assert group is not None
        member = group.get(member_id)
        if group.is_in(S.COMPLETING_REBALANCE):
            member.awaiting_sync = future
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader %s for group %s for generation %d. The group has %d "
                         "members, %d of which are static.", member_id, group_id, group.generation_id, group.size,
                         len(group.static_members))
                assignment = {m: assignments.get(m, b"") for m in group.members}
                self._spawn(self._store_assignment(group, generation_id, assignment))
        else:  # Stable: hand out the current assignment
            self._remove_pending_sync_member(group, member_id)
            future.set_result(SyncGroupResult(Errors.NONE, group.protocol_type, group.protocol_name,
                                              member.assignment))
            self._schedule_heartbeat(group, member)
        return future

    @staticmethod
    def _sync_error(group: GroupMetadata, generation_id: int, member_id: str, protocol_type: str | None,
                    protocol_name: str | None, group_instance_id: str | None) -> Errors | None:
        if group.is_in(S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        member_error = group.member_error(member_id, group_instance_id, generation_id)
        if member_error is not None:
            return member_error
        if (protocol_type is not None and group.protocol_type != protocol_type) or \
                (protocol_name is not None and group.protocol_name != protocol_name):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        if group.is_in(S.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_in(S.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return None

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._cancel_sync_timer(group)

    async def _store_assignment(self, group: GroupMetadata, generation_id: int, assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        # A member may have joined meanwhile: act only if this generation is still completing.
        if not (group.is_in(S.COMPLETING_REBALANCE) and group.generation_id == generation_id):
            return
        if error is not Errors.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, "Error when storing group assignment during SyncGroup")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, Errors.NONE)
        group.transition_to(S.STABLE)

    # --- Heartbeat / LeaveGroup --------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> Errors:
        error = self.validate_group_status(group_id)
        if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            return Errors.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_in(S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if group.consumer_group is not None and self.mixed_groups is not None:
            return self.mixed_groups.heartbeat(group.consumer_group, member_id, group_instance_id, generation_id)
        member_error = group.member_error(member_id, group_instance_id, generation_id)
        if member_error is not None:
            return member_error
        if group.is_in(S.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.get(member_id))
        return Errors.REBALANCE_IN_PROGRESS if group.is_in(S.PREPARING_REBALANCE) else Errors.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[Errors, list[Errors]]:
        """Members leave by member id, or (admin removal) by group instance id with an empty member id."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.NONE, [Errors.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_in(S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        if group.consumer_group is not None and self.mixed_groups is not None:
            return Errors.NONE, self.mixed_groups.leave(group.consumer_group, leaving)
        errors = []
        for member_id, group_instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_member_id(group_instance_id)
                if current is None:
                    errors.append(Errors.UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
                errors.append(Errors.NONE)
                continue
            elif group.is_static_member_fenced(group_instance_id, member_id):
                errors.append(Errors.FENCED_INSTANCE_ID)
                continue
            if not group.has(member_id):
                errors.append(Errors.UNKNOWN_MEMBER_ID)
                continue
            log.info("Member %s has left group %s through explicit LeaveGroup", member_id, group_id)
            self._remove_member_and_update_group(group, group.get(member_id), "removing member on LeaveGroup")
            errors.append(Errors.NONE)
        return Errors.NONE, errors

    def keep_alive(self, group: GroupMetadata, member_id: str) -> None:
        """An offset commit from a member counts as a heartbeat."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)
