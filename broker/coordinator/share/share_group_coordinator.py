"""The share-group part of the group coordinator (Kafka's GroupMetadataManager.shareGroupHeartbeat
and its describe, list and delete paths).

Share groups live next to the classic groups of the same ``__consumer_offsets`` partition: the
broker that coordinates a group id coordinates it whatever its type, and a group id belongs to
one type at a time. Heartbeats join (epoch 0), keep (the current epoch) or leave (epoch -1) a
member; any change of members, subscriptions or subscribed topics' partitions bumps the group
epoch and the ``simple`` assignor recomputes the assignment. A member that does not heartbeat
within ``group.share.session.timeout.ms`` is fenced; listeners (the SharePartitionManager) then
release the records it holds. A heartbeat's changes are applied at once and undone when their
records cannot be written to ``__consumer_offsets`` (``broker/coordinator/group_changes.py``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.coordinator_records import Record
from broker.coordinator.group_changes import CoordinatorWriteError, write_or_revert
from broker.coordinator.consumer.topic_subscriptions import metadata_hash
from broker.coordinator.share import share_group_records as records
from broker.coordinator.share.share_group import (
    Assignment,
    ShareGroup,
    ShareGroupMember,
    simple_assign,
)
from protocol.errors import Errors, KafkaApiError

log = logging.getLogger(__name__)

LEAVE_GROUP_MEMBER_EPOCH = -1
JOIN_GROUP_MEMBER_EPOCH = 0


@dataclass(frozen=True)
class ShareGroupSettings:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


@dataclass
class HeartbeatResult:
    error: Errors = Errors.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged since the member's last heartbeat
    records: list[Record] = field(default_factory=list)  # written to __consumer_offsets before the answer


class ShareGroupHeartbeatError(Exception):
    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


# (topic name) -> (topic id, partition count), None for a topic that does not exist
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]
# Appends a group's records to its __consumer_offsets partition: the error, NONE once written.
RecordWriter = Callable[[str, list[Record]], Awaitable[Errors]]


class ShareGroupCoordinator:
    def __init__(self, settings: ShareGroupSettings, topics: TopicLookup,
                 is_other_group_type: Callable[[str], bool]) -> None:
        self.settings = settings
        self._topics = topics
        self.is_other_group_type = is_other_group_type  # a classic or consumer group has the id
        self.groups: dict[str, ShareGroup] = {}
        # Called as (group id, member id) when a member is fenced (its session ran out). A member
        # that leaves is not reported: it closes its share sessions itself (epoch -1) and its last
        # acknowledgements may still be on their way.
        self.member_fenced_listeners: list[Callable[[str, str], None]] = []
        self.write: RecordWriter | None = None
        # (group id, share.* name) -> the group's config (kafka-configs --entity-type groups)
        self.group_config: Callable[[str, str], Any] | None = None
        self._background: set[asyncio.Task[None]] = set()

    def session_timeout_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.session.timeout.ms", self.settings.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.heartbeat.interval.ms", self.settings.heartbeat_interval_ms)

    def _setting(self, group_id: str, name: str, default: int) -> int:
        value = None if self.group_config is None else self.group_config(group_id, name)
        return default if value is None else int(value)

    # --- heartbeat -----------------------------------------------------------------------------

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                        subscribed_topic_names: list[str] | None, client_id: str, client_host: str,
                        now_ms: int) -> HeartbeatResult:
        """Apply a heartbeat to the group and write its records; a change whose records cannot be
        written is undone (as Kafka's runtime reverts it) and the answer is the coordinator error."""
        written: list[Record] = []
        known = self.groups.get(group_id)
        group = known if known is not None else ShareGroup(group_id)
        before = group.snapshot()
        try:
            result = self._heartbeat(group, member_id, member_epoch, rack_id, subscribed_topic_names,
                                     client_id, client_host, now_ms, written)
        except ShareGroupHeartbeatError as exc:
            return HeartbeatResult(exc.error, str(exc))
        if known is None:
            self.groups[group_id] = group
        result.records = written
        if written:
            try:
                await write_or_revert(group, before, lambda: self.write_records(group_id, written))
            except KafkaApiError as exc:
                if known is None and not group.members and self.groups.get(group_id) is group:
                    del self.groups[group_id]  # the group this heartbeat created is not written either
                return HeartbeatResult(exc.error)
        return result

    def _heartbeat(self, group: ShareGroup, member_id: str, member_epoch: int, rack_id: str | None,
                   subscribed: list[str] | None, client_id: str, client_host: str, now_ms: int,
                   written: list[Record]) -> HeartbeatResult:
        """The heartbeat's changes, applied to ``group`` (raising before any when the request fails)."""
        group_id = group.group_id
        _validate(group_id, member_id, member_epoch, subscribed)
        if self.is_other_group_type(group_id):
            raise ShareGroupHeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if member_id not in group.members:
                raise ShareGroupHeartbeatError(Errors.UNKNOWN_MEMBER_ID,
                                               f"Member {member_id} is not a member of group {group_id}.")
            self.remove_member(group, member_id, written)
            return HeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        member = group.members.get(member_id)
        bump = False  # the group epoch moves at most once per heartbeat, as Kafka's
        described = None if member is None else (member.rack_id, sorted(member.subscribed_topic_names))
        if member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if member is None:
                if len(group.members) >= self.settings.max_size:
                    raise ShareGroupHeartbeatError(
                        Errors.GROUP_MAX_SIZE_REACHED,
                        f"The share group has reached its maximum capacity of {self.settings.max_size} members.")
                member = group.members[member_id] = ShareGroupMember(member_id, 0, client_id, client_host, [])
                bump = True
        elif member is None:
            raise ShareGroupHeartbeatError(Errors.UNKNOWN_MEMBER_ID,
                                           f"Member {member_id} is not a member of group {group_id}.")
        elif member_epoch != member.member_epoch:
            raise ShareGroupHeartbeatError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({member_epoch}) than the one known "
                f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                "partitions and rejoin.")
        if subscribed is not None and sorted(subscribed) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(subscribed)
            bump = True
        if rack_id is not None:
            member.rack_id = rack_id
        member.client_id, member.client_host = client_id, client_host
        member.session_deadline_ms = now_ms + self.session_timeout_ms(group_id)
        if described != (member.rack_id, sorted(member.subscribed_topic_names)):
            written.append(records.member_metadata_record(group_id, member))
        self._maybe_reassign(group, bump, written)
        previous = member.assignment
        target = group.target_assignment.get(member_id, {})
        changed = target != previous or member.member_epoch != group.assignment_epoch
        if changed:
            member.previous_member_epoch = member.member_epoch
            member.assignment = target
            member.member_epoch = group.assignment_epoch
            written.append(records.current_assignment_record(group_id, member))
        send = changed or member_epoch == JOIN_GROUP_MEMBER_EPOCH
        return HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                               assignment=target if send else None)

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        found = {}
        for topic in group.subscribed_topics():
            described = self._topics(topic)
            if described is not None:
                found[topic] = described
        return found

    def _maybe_reassign(self, group: ShareGroup, bump: bool, written: list[Record]) -> None:
        group.subscription_metadata = self._subscription_metadata(group)
        digest = metadata_hash(group.subscription_metadata)
        if digest != group.metadata_hash:
            group.metadata_hash = digest
            bump = True
        if bump:
            group.group_epoch += 1
            written.append(records.group_epoch_record(group))
        if group.group_epoch > group.assignment_epoch:
            members = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
            target = simple_assign(members, group.subscription_metadata)
            changed = {m: a for m, a in target.items() if group.target_assignment.get(m) != a}
            group.target_assignment = target
            group.assignment_epoch = group.group_epoch
            written.extend(records.target_assignment_records(group, changed))
            self._note_initialized(group, written)

    @staticmethod
    def _note_initialized(group: ShareGroup, written: list[Record]) -> None:
        """Remember every share-partition the group is assigned (their state is what deleting the
        group deletes); written when the set grows."""
        grown = False
        for name, (topic_id, count) in group.subscription_metadata.items():
            known = group.initialized_topics.get(topic_id, (name, frozenset()))[1]
            if len(known) < count:
                group.initialized_topics[topic_id] = (name, known | frozenset(range(count)))
                grown = True
        if grown:
            written.append(records.state_partition_record(group))

    # --- members leaving -----------------------------------------------------------------------

    def remove_member(self, group: ShareGroup, member_id: str, written: list[Record]) -> None:
        del group.members[member_id]
        group.target_assignment.pop(member_id, None)
        group.group_epoch += 1
        written.extend(records.member_tombstones(group.group_id, member_id))
        written.append(records.group_epoch_record(group))

    def expire_sessions(self, now_ms: int) -> list[tuple[str, str]]:
        """Fence every member whose session ran out; the (group, member) pairs fenced."""
        fenced = []
        for group in self.groups.values():
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now_ms:
                    written: list[Record] = []
                    self.remove_member(group, member.member_id, written)
                    self.write_in_background(group.group_id, written)
                    fenced.append((group.group_id, member.member_id))
                    for listener in self.member_fenced_listeners:
                        listener(group.group_id, member.member_id)
        return fenced

    # --- admin ---------------------------------------------------------------------------------

    async def delete_group(self, group_id: str) -> tuple[Errors, ShareGroup | None]:
        """DeleteGroups for a share group: only an empty one (NON_EMPTY_GROUP otherwise); the
        deleted group (whose share-partitions' state is to be deleted too) once its records are."""
        group = self.groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND, None
        if group.members:
            return Errors.NON_EMPTY_GROUP, None
        try:
            await self.write_records(group_id, records.group_tombstones(group))
        except KafkaApiError as exc:
            return exc.error, None
        self.groups.pop(group_id, None)
        return Errors.NONE, group

    async def create_empty_group(self, group_id: str) -> ShareGroup:
        """An empty share group (AlterShareGroupOffsets on an unknown id creates one), written as its
        epoch record so that it outlives the coordinator; not created when that cannot be written."""
        group = self.groups[group_id] = ShareGroup(group_id)
        try:
            await self.write_records(group_id, [records.group_epoch_record(group)])
        except KafkaApiError:
            if self.groups.get(group_id) is group and not group.members:
                del self.groups[group_id]
            raise
        return group

    # --- durability ----------------------------------------------------------------------------

    async def write_records(self, group_id: str, written: list[Record]) -> None:
        """Append a change's records to the group's ``__consumer_offsets`` partition, raising the
        coordinator error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) when they are not written."""
        if self.write is None:
            return
        error = await self.write(group_id, written)
        if error is not Errors.NONE:
            raise CoordinatorWriteError(error)

    def write_in_background(self, group_id: str, written: list[Record]) -> None:
        """Append records no request waits for (a fenced member's); a failed write is logged, and
        the group's in-memory state stays authoritative while this broker coordinates it."""
        if not written or self.write is None:
            return
        task = asyncio.get_running_loop().create_task(self._write_logged(group_id, written))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _write_logged(self, group_id: str, written: list[Record]) -> None:
        error = await self.write(group_id, written)  # type: ignore[misc]
        if error is not Errors.NONE:
            log.warning("Writing the records of share group %s failed: %s", group_id, error.name)

    def load(self, groups: list[ShareGroup], now_ms: int) -> None:
        """Install the share groups a loaded ``__consumer_offsets`` partition held; their members get
        a full session to heartbeat to the new coordinator."""
        for group in groups:
            group.subscription_metadata = self._subscription_metadata(group)
            for member in group.members.values():
                member.session_deadline_ms = now_ms + self.session_timeout_ms(group.group_id)
            self.groups[group.group_id] = group

    def unload(self, owned_here: Callable[[str], bool]) -> None:
        """Forget the groups of a partition this broker no longer coordinates."""
        for group_id in [g for g in self.groups if not owned_here(g)]:
            del self.groups[group_id]


def _validate(group_id: str, member_id: str, member_epoch: int, subscribed: list[str] | None) -> None:
    """ShareGroupHeartbeatRequest's checks (Kafka's throwIfShareGroupHeartbeatRequestIsInvalid)."""
    if not group_id:
        raise ShareGroupHeartbeatError(Errors.INVALID_REQUEST, "GroupId can't be empty.")
    if not member_id or not member_id.strip():
        raise ShareGroupHeartbeatError(Errors.INVALID_REQUEST, "MemberId can't be empty.")
    if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise ShareGroupHeartbeatError(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
    if member_epoch == JOIN_GROUP_MEMBER_EPOCH and not subscribed:
        raise ShareGroupHeartbeatError(Errors.INVALID_REQUEST,
                                       "SubscribedTopicNames must be set in first request.")
