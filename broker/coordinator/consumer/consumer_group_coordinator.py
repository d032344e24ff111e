"""ConsumerGroupHeartbeat and its timers: the KIP-848 half of Kafka's GroupMetadataManager.

A heartbeat is handled in Kafka's three steps: (1) create or update the member, bumping the
group epoch when its subscription changed; (2) compute a new target assignment with the
group's server-side assignor when the group epoch passed the assignment epoch; (3) reconcile the
member towards its part of the target (``current_assignment_builder``). The changes are applied
to the in-memory group at once and written to ``__consumer_offsets`` as Kafka's records; the
answer goes out once the write is replicated. A member that stops heartbeating for its session
timeout, or keeps partitions past its rebalance timeout, is fenced: removed, and the group epoch
bumped so the others take over its partitions.

Consumer groups live in the classic coordinator's ``__consumer_offsets`` partitions and share
their offsets store: a ``GroupMetadata`` entry whose ``consumer_group`` is set is a consumer group.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from broker.coordinator.consumer import consumer_group_records as records
from broker.coordinator.consumer.assignors import MemberSubscription, configured_assignors
from broker.coordinator.consumer.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.consumer.classic_members import ClassicMemberOperations
from broker.coordinator.consumer.current_assignment_builder import OwnedPartitions, reconcile
from broker.coordinator.consumer.group_conversion import (
    DOWNGRADE_POLICIES,
    check_upgrade,
    classic_members_from_consumer,
    consumer_group_from_classic,
)
from broker.coordinator.consumer.topic_subscriptions import compile_regex, metadata_hash, resolve_regex, topic_layout
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState
from broker.coordinator.group_changes import CoordinatorWriteError, write_or_revert
from protocol.errors import Errors, KafkaApiError
from storage.clock import now_ms

if TYPE_CHECKING:
    from broker.admin.group_configs import GroupConfigManager
    from broker.coordinator.group.group_coordinator import GroupCoordinator
    from broker.metadata_cache import MetadataCache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The broker's group.consumer.* settings (Kafka's GroupCoordinatorConfig)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"

    @classmethod
    def from_broker_config(cls, config: Any) -> ConsumerGroupConfig:
        return cls(
            session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
            max_size=config.get("group.consumer.max.size"),
            assignors=tuple(configured_assignors(config.get("group.consumer.assignors"))),
            migration_policy=config.get("group.consumer.migration.policy"),
        )


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: OwnedPartitions
    client_id: str
    client_host: str
    version: int


@dataclass(frozen=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None


class ConsumerGroupCoordinator:
    def __init__(self, classic: GroupCoordinator, config: ConsumerGroupConfig, metadata_cache: MetadataCache,
                 group_configs: GroupConfigManager | None = None) -> None:
        self.classic = classic
        self.group_configs = group_configs
        self.manager = classic.manager
        self.config = config
        self.metadata_cache = metadata_cache
        self.assignors = configured_assignors(list(config.assignors))
        self._session_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._rebalance_timers: dict[tuple[str, str], tuple[int, asyncio.TimerHandle]] = {}
        classic.group_loaded_listeners.append(self._on_group_loaded)
        classic.group_unloaded_listeners.append(self._on_group_unloaded)
        classic.mixed_groups = ClassicMemberOperations(self)
        # Whether a share group (KIP-932) has the id: set by the share components when they are on.
        self.is_share_group: Callable[[str], bool] = lambda _group_id: False

    # --- per-group settings --------------------------------------------------------------------------
    def session_timeout_ms(self, group: ConsumerGroup) -> int:
        if self.group_configs is None:
            return self.config.session_timeout_ms
        return int(self.group_configs.get(group.group_id, "consumer.session.timeout.ms"))

    def heartbeat_interval_ms(self, group: ConsumerGroup) -> int:
        if self.group_configs is None:
            return self.config.heartbeat_interval_ms
        return int(self.group_configs.get(group.group_id, "consumer.heartbeat.interval.ms"))

    # --- validation ----------------------------------------------------------------------------------
    def _validate(self, r: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, in its order."""
        def invalid(message: str) -> KafkaApiError:
            return KafkaApiError(Errors.INVALID_REQUEST, message)

        if not r.group_id:
            raise invalid("GroupId can't be empty.")
        if r.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if r.rack_id == "":
            raise invalid("RackId can't be empty.")
        if r.version >= 1 and not r.member_id:
            raise invalid("MemberId can't be empty.")
        if r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not r.member_id:
                raise invalid("MemberId can't be empty.")
        elif r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if r.owned is None or r.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not r.member_id:
                raise invalid("MemberId can't be empty.")
            if r.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if r.server_assignor is not None and r.server_assignor not in self.assignors:
            raise KafkaApiError(Errors.UNSUPPORTED_ASSIGNOR,
                                f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
                                f"{', '.join(self.assignors)}.")
        if r.subscribed_topic_regex:
            compile_regex(r.subscribed_topic_regex)

    def _group(self, group_id: str, create: bool) -> tuple[GroupMetadata, ConsumerGroup, list[records.Record]]:
        """The consumer group, created (or converted from an empty classic group) when ``create``."""
        error = self.classic.validate_group_status(group_id)
        if error is not None:
            raise KafkaApiError(error)
        if self.is_share_group(group_id):
            raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        entry = self.manager.get_group(group_id)
        written: list[records.Record] = []
        if entry is not None and entry.consumer_group is not None and not entry.is_in(GroupState.DEAD):
            return entry, entry.consumer_group, written
        if not create:
            raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if entry is not None and not entry.is_in(GroupState.DEAD):
            if entry.generation_id > 0:  # the classic group's metadata record goes: it is a consumer group now
                written.append(self.classic.classic_group_tombstone(group_id))
            if entry.members or entry.pending_members:
                check_upgrade(entry, self.config.migration_policy, self.config.max_size)
                group = consumer_group_from_classic(entry, self.metadata_cache)
                self.classic.hand_over_to_consumer_group(entry)
                entry.consumer_group = group
                written.extend(records.group_records(group))
                for member in group.members.values():
                    self.schedule_timers(group, member)
                log.info("[GroupId %s] Upgraded the classic group to a consumer group (%d members)", group_id,
                         len(group.members))
                return entry, group, written
        else:
            entry = GroupMetadata(group_id)
            self.manager.groups[group_id] = entry
        entry.consumer_group = ConsumerGroup(group_id)
        log.info("Created consumer group %s", group_id)
        return entry, entry.consumer_group, written

    # --- the heartbeat -----------------------------------------------------------------------------
    async def heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult:
        self._validate(r)
        if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return await self._leave(r)
        known = self.manager.get_group(r.group_id)
        entry, group, written = self._group(r.group_id, create=r.member_epoch == 0)
        created = entry is not known
        before = group.snapshot()
        member_id = r.member_id or str(uuid.uuid4())
        if r.member_epoch == 0 and member_id not in group.members and len(group.members) >= self.config.max_size:
            raise KafkaApiError(Errors.GROUP_MAX_SIZE_REACHED,
                                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        member = self._member(group, member_id, r, written)
        updated = replace(
            member, instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=r.server_assignor if r.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(sorted(r.subscribed_topic_names)) if r.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(r.subscribed_topic_regex or None) if r.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=r.client_id, client_host=r.client_host)
        reconciled = self.update_and_reconcile(group, member, updated, r.owned, written)
        try:
            await self.write_or_revert(group, before, written)
        except KafkaApiError:
            if created and not group.members and self.manager.get_group(r.group_id) is entry:
                del self.manager.groups[r.group_id]  # the group this heartbeat created is not written either
                group.mark_dead()
            raise
        full = r.member_epoch == 0 or (r.rebalance_timeout_ms != -1 and r.owned is not None and (
            r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None))
        changed = reconciled.assigned != member.assigned or member.member_id != reconciled.member_id
        return HeartbeatResult(reconciled.member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group),
                               reconciled.assigned if full or changed else None)

    def update_and_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                             owned: OwnedPartitions, written: list[records.Record]) -> ConsumerGroupMember:
        """Kafka's three steps for a member that joined or heartbeated, whichever protocol it speaks:
        install it (a new epoch if its subscription changed), compute the target assignment if the
        group epoch moved past it, and reconcile the member towards its part."""
        bump = group.group_epoch == 0
        if updated != member or member.member_id not in group.members:
            written.append(records.member_metadata_record(group.group_id, updated))
            bump = bump or not updated.subscription_equals(member) or member.member_id not in group.members
        group.update_member(updated)
        bump = self._refresh_subscriptions(group, written) or bump
        if bump:
            self._bump_epoch(group, written)
        self.ensure_target_assignment(group, written)
        reconciled = reconcile(updated, group.assignment_epoch, group.target_assignment.get(updated.member_id, {}),
                               group.current_partition_epoch, owned)
        if reconciled != updated:
            written.append(records.current_assignment_record(group.group_id, reconciled))
            group.update_member(reconciled)
        self.schedule_timers(group, reconciled)
        return reconciled

    def ensure_target_assignment(self, group: ConsumerGroup, written: list[records.Record]) -> None:
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, written)

    def _bump_epoch(self, group: ConsumerGroup, written: list[records.Record]) -> None:
        group.group_epoch += 1
        written.append(records.group_epoch_record(group.group_id, group.group_epoch, group.metadata_hash))
        group.update_state()
        log.info("[GroupId %s] Bumped group epoch to %d", group.group_id, group.group_epoch)

    def _member(self, group: ConsumerGroup, member_id: str, r: HeartbeatRequest,
                written: list[records.Record]) -> ConsumerGroupMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember."""
        if r.instance_id is None:
            member = group.member(member_id)
            if member is None:
                if r.member_epoch != 0:
                    raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not a member of group {group.group_id}.")
                return ConsumerGroupMember(member_id)
            if r.member_epoch != 0:
                self._check_epoch(member, r.member_epoch, r.owned)
            return member
        existing = group.static_member(r.instance_id)
        if r.member_epoch == 0:
            if existing is None:
                return group.member(member_id) or ConsumerGroupMember(member_id, instance_id=r.instance_id)
            if existing.member_id == member_id:
                return existing
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaApiError(Errors.UNRELEASED_INSTANCE_ID,
                                    f"Static member with unknown member id and instance id {r.instance_id} re-joins "
                                    f"the consumer group {group.group_id}. Instance id is already used by the "
                                    f"existing member with member id {existing.member_id}.")
            # The static member comes back under a new member id: it takes over the old one's place.
            target = group.target_assignment.get(existing.member_id, {})
            self.remove(group, existing.member_id, written, bump=False)
            replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            group.target_assignment[member_id] = target
            written.append(records.target_assignment_record(group.group_id, member_id, target))
            return replacement
        if existing is None:
            raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaApiError(Errors.FENCED_INSTANCE_ID,
                                f"Static member {member_id} with instance id {r.instance_id} is fenced by existing "
                                f"member {existing.member_id}.")
        self._check_epoch(existing, r.member_epoch, r.owned)
        return existing

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, received: int, owned: OwnedPartitions) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: the previous epoch is accepted from a member whose answer
        was lost, as long as it owns no more than its current assignment."""
        if received > member.member_epoch:
            raise KafkaApiError(Errors.FENCED_MEMBER_EPOCH,
                                f"The consumer group member has a greater member epoch ({received}) than the one "
                                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                "all its partitions and rejoin.")
        if received < member.member_epoch:
            subset = owned is not None and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
            if received != member.previous_member_epoch or not subset:
                raise KafkaApiError(Errors.FENCED_MEMBER_EPOCH,
                                    f"The consumer group member has a smaller member epoch ({received}) than the one "
                                    f"known by the group coordinator ({member.member_epoch}). The member must "
                                    "abandon all its partitions and rejoin.")

    def _refresh_subscriptions(self, group: ConsumerGroup, written: list[records.Record]) -> bool:
        """Resolve the group's regular expressions and hash its subscribed topics; True when either
        changed (a new epoch and target assignment are due)."""
        changed = False
        regexes = group.regexes()
        for regex in sorted(regexes):
            topics = resolve_regex(regex, self.metadata_cache)
            if group.resolved_regexes.get(regex) != topics:
                group.resolved_regexes[regex] = topics
                written.append(records.regex_record(group.group_id, regex, topics, self.metadata_cache.stamp, now_ms()))
                changed = True
        for regex in [r for r in group.resolved_regexes if r not in regexes]:
            del group.resolved_regexes[regex]
            written.append(records.regex_tombstone(group.group_id, regex))
        digest = metadata_hash(topic_layout(group.subscribed_topic_names(), self.metadata_cache))
        if digest != group.metadata_hash:
            group.metadata_hash = digest
            changed = True
        return changed

    def _update_target_assignment(self, group: ConsumerGroup, written: list[records.Record]) -> None:
        layout = topic_layout(group.subscribed_topic_names(), self.metadata_cache)
        subscriptions = {
            member_id: MemberSubscription(
                frozenset(layout[t][0] for t in group.member_topics(member) if t in layout),
                group.target_assignment.get(member_id, {}))
            for member_id, member in group.members.items()}
        assignor = self.assignors[group.preferred_assignor(next(iter(self.assignors)))]
        new = assignor.assign(subscriptions, {topic_id: count for topic_id, count in layout.values()})
        for member_id, assignment in new.items():
            if group.target_assignment.get(member_id) != assignment:
                group.target_assignment[member_id] = assignment
                written.append(records.target_assignment_record(group.group_id, member_id, assignment))
        group.assignment_epoch = group.group_epoch
        written.append(records.target_assignment_epoch_record(group.group_id, group.assignment_epoch))
        group.update_state()
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with the %s assignor",
                 group.group_id, group.assignment_epoch, assignor.name)

    # --- leaving and fencing ---------------------------------------------------------------------------
    async def _leave(self, r: HeartbeatRequest) -> HeartbeatResult:
        _, group, written = self._group(r.group_id, create=False)
        before = group.snapshot()
        if r.instance_id is None:
            if group.member(r.member_id) is None:
                raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID,
                                    f"Member {r.member_id} is not a member of group {group.group_id}.")
            self.remove(group, r.member_id, written)
            log.info("[GroupId %s] Member %s left the consumer group", group.group_id, r.member_id)
        else:
            member = group.static_member(r.instance_id)
            if member is None:
                raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
            if member.member_id != r.member_id:
                raise KafkaApiError(Errors.FENCED_INSTANCE_ID,
                                    f"Static member {r.member_id} with instance id {r.instance_id} is fenced by "
                                    f"existing member {member.member_id}.")
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # The static member will come back: it keeps its partitions until its session expires.
                left = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
                group.update_member(left)
                written.append(records.current_assignment_record(group.group_id, left))
                self._cancel_rebalance_timer(group.group_id, member.member_id)
            else:
                self.remove(group, member.member_id, written)
        self._maybe_downgrade(group, written)
        await self.write_or_revert(group, before, written)
        return HeartbeatResult(r.member_id, r.member_epoch, 0, None)

    def remove(self, group: ConsumerGroup, member_id: str, written: list[records.Record], bump: bool = True) -> None:
        group.remove_member(member_id)
        written.extend(records.member_tombstones(group.group_id, member_id))
        timer = self._session_timers.pop((group.group_id, member_id), None)
        if timer is not None:
            timer.cancel()
        self._cancel_rebalance_timer(group.group_id, member_id)
        if bump:
            self._refresh_subscriptions(group, written)
            self._bump_epoch(group, written)

    def _fence(self, group_id: str, member_id: str, reason: str) -> None:
        entry = self.manager.get_group(group_id)
        group = None if entry is None else entry.consumer_group
        if group is None or group.member(member_id) is None:
            return
        log.info("[GroupId %s] Member %s fenced from the group: %s", group_id, member_id, reason)
        written: list[records.Record] = []
        self.remove(group, member_id, written)
        self.after_members_left(group, written)

    def after_members_left(self, group: ConsumerGroup, written: list[records.Record]) -> None:
        """Write what removing members wrote (not awaited: a lost write is redone by the next change),
        converting the group back to a classic one first if only classic members are left."""
        self._maybe_downgrade(group, written)
        self.classic.track([asyncio.get_running_loop().create_task(self.write_quietly(group.group_id, written))])

    def _maybe_downgrade(self, group: ConsumerGroup, written: list[records.Record]) -> None:
        if self.config.migration_policy not in DOWNGRADE_POLICIES or not group.members \
                or any(m.classic is None for m in group.members.values()):
            return
        entry = self.manager.get_group(group.group_id)
        if entry is None or entry.consumer_group is not group:
            return
        members = classic_members_from_consumer(group, self.metadata_cache)
        written.extend(records.group_tombstones(group))
        for member_id in list(group.members):
            timer = self._session_timers.pop((group.group_id, member_id), None)
            if timer is not None:
                timer.cancel()
            self._cancel_rebalance_timer(group.group_id, member_id)
        entry.consumer_group = None
        group.mark_dead()
        self.classic.adopt_downgraded_group(entry, members, group.group_epoch)
        log.info("[GroupId %s] Downgraded the consumer group to a classic group (%d members)", group.group_id,
                 len(members))

    # --- timers ---------------------------------------------------------------------------------------
    def member_session_timeout_ms(self, group: ConsumerGroup, member: ConsumerGroupMember) -> int:
        """A classic member keeps the session timeout it joined with."""
        return member.classic.session_timeout_ms if member.classic is not None else self.session_timeout_ms(group)

    def schedule_timers(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        loop = asyncio.get_running_loop()
        key = (group.group_id, member.member_id)
        old = self._session_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._session_timers[key] = loop.call_later(
            self.member_session_timeout_ms(group, member) / 1000, self._fence, group.group_id, member.member_id,
            "its session timed out")
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            scheduled = self._rebalance_timers.get(key)
            if scheduled is None or scheduled[0] != member.member_epoch:
                self._cancel_rebalance_timer(*key)
                self._rebalance_timers[key] = (member.member_epoch, loop.call_later(
                    max(member.rebalance_timeout_ms, 0) / 1000, self._on_rebalance_timeout, group.group_id,
                    member.member_id, member.member_epoch))
        else:
            self._cancel_rebalance_timer(*key)

    def _on_rebalance_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        self._rebalance_timers.pop((group_id, member_id), None)
        entry = self.manager.get_group(group_id)
        member = None if entry is None or entry.consumer_group is None else entry.consumer_group.member(member_id)
        if member is not None and member.member_epoch == epoch and member.state is MemberState.UNREVOKED_PARTITIONS:
            self._fence(group_id, member_id, "it did not revoke its partitions within its rebalance timeout")

    def _cancel_rebalance_timer(self, group_id: str, member_id: str) -> None:
        scheduled = self._rebalance_timers.pop((group_id, member_id), None)
        if scheduled is not None:
            scheduled[1].cancel()

    def _on_group_loaded(self, entry: GroupMetadata) -> None:
        group = entry.consumer_group
        if group is None:
            return
        loop = asyncio.get_running_loop()
        for member in group.members.values():
            self._session_timers[(group.group_id, member.member_id)] = loop.call_later(
                self.member_session_timeout_ms(group, member) / 1000, self._fence, group.group_id, member.member_id,
                "its session timed out")

    def _on_group_unloaded(self, entry: GroupMetadata) -> None:
        group = entry.consumer_group
        if group is None:
            return
        for member_id in list(group.members):
            timer = self._session_timers.pop((group.group_id, member_id), None)
            if timer is not None:
                timer.cancel()
            self._cancel_rebalance_timer(group.group_id, member_id)
        group.mark_dead()

    # --- writing ---------------------------------------------------------------------------------------
    async def write(self, group_id: str, written: list[records.Record]) -> None:
        if not written:
            return
        error, _ = await self.manager.append_records(group_id, written)
        if error is not Errors.NONE:
            raise CoordinatorWriteError(error)

    async def write_or_revert(self, group: ConsumerGroup, before: ConsumerGroup, written: list[records.Record]) -> None:
        """Write a change's records; if they cannot be written, the group goes back to ``before``."""
        if written:
            await write_or_revert(group, before, lambda: self.write(group.group_id, written))

    async def write_quietly(self, group_id: str, written: list[records.Record]) -> None:
        try:
            await self.write(group_id, written)
        except KafkaApiError as exc:
            log.warning("Writing the records of consumer group %s failed: %s", group_id, exc)

    # --- reads ------------------------------------------------------------------------------------------
    def describe(self, group_id: str) -> ConsumerGroup:
        """ConsumerGroupDescribe's group, or its error (GROUP_ID_NOT_FOUND for a classic or unknown group)."""
        error = self.classic.validate_group_status(group_id)
        if error is not None:
            raise KafkaApiError(error)
        entry = self.manager.get_group(group_id)
        if entry is None and self.is_share_group(group_id):
            raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if entry is None or entry.is_in(GroupState.DEAD):
            raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if entry.consumer_group is None:
            raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return entry.consumer_group
