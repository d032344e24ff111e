"""Members speaking the classic protocol inside a KIP-848 consumer group (Kafka's
classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup): what lets a group migrate online.

While a group rolls from ``group.protocol=classic`` to ``consumer`` (or back), both kinds of
member share one consumer group. A classic member's JoinGroup is its heartbeat with a full
subscription: it is answered at once with its member epoch as the generation, and no member is
the leader, since the coordinator assigns; SyncGroup hands it its reconciled partitions as a
ConsumerProtocolAssignment. Its Heartbeat answers REBALANCE_IN_PROGRESS whenever it has something
to reconcile, which makes it join again; revocation happens the classic way, by rejoining without
the partitions.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from broker.coordinator.consumer import consumer_group_records as records
from broker.coordinator.consumer.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.group.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    SyncGroupResult,
)
from protocol.consumer_protocol import decode_subscription, encode_assignment
from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import ProtocolError

if TYPE_CHECKING:
    from broker.coordinator.consumer.consumer_group_coordinator import ConsumerGroupCoordinator


class ClassicMemberOperations:
    def __init__(self, coordinator: ConsumerGroupCoordinator) -> None:
        self.coordinator = coordinator

    def _names_to_ids(self, owned: dict[str, frozenset[int]]) -> Assignment:
        cache = self.coordinator.metadata_cache
        return {cache.topic_id(t): ps for t, ps in owned.items() if cache.contains_topic(t)}

    def _ids_to_names(self, assignment: Assignment) -> dict[str, list[int]]:
        cache = self.coordinator.metadata_cache
        named = {}
        for topic_id, partitions in assignment.items():
            name = cache.topic_name(topic_id)
            if name is not None:
                named[name] = sorted(partitions)
        return named

    @staticmethod
    def _protocol_name(group: ConsumerGroup, member: ConsumerGroupMember) -> str:
        """The classic assignor name reported back: the member's first one that every classic member
        supports (only the name matters: the coordinator assigns)."""
        assert member.classic is not None
        common: set[str] | None = None
        for other in group.members.values():
            if other.classic is not None:
                names = {name for name, _ in other.classic.protocols}
                common = names if common is None else common & names
        return next((n for n, _ in member.classic.protocols if common is None or n in common),
                    member.classic.protocols[0][0])

    # --- JoinGroup --------------------------------------------------------------------------------------
    async def join(self, group: ConsumerGroup, member_id: str, instance_id: str | None, require_known_member_id: bool,
                   client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                   protocol_type: str, protocols: list[tuple[str, bytes]]) -> JoinGroupResult:
        coordinator = self.coordinator
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            return JoinGroupResult(member_id, Errors.INCONSISTENT_GROUP_PROTOCOL)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ProtocolError:
            return JoinGroupResult(member_id, Errors.INCONSISTENT_GROUP_PROTOCOL)
        existing = group.static_member(instance_id) if instance_id is not None else None
        if member_id == UNKNOWN_MEMBER_ID:
            if existing is not None:
                member_id = existing.member_id
            else:
                member_id = str(uuid.uuid4())
                if require_known_member_id:  # KIP-394: learn the id, then join with it
                    return JoinGroupResult(member_id, Errors.MEMBER_ID_REQUIRED)
        member = group.member(member_id)
        if member is None:
            if existing is not None:
                return JoinGroupResult(member_id, Errors.FENCED_INSTANCE_ID)
            if len(group.members) >= coordinator.config.max_size:
                return JoinGroupResult(member_id, Errors.GROUP_MAX_SIZE_REACHED)
            member = ConsumerGroupMember(member_id, instance_id=instance_id)
        updated = replace(
            member, instance_id=instance_id, rack_id=subscription.rack_id, client_id=client_id, client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=tuple(sorted(subscription.topics)),
            subscribed_topic_regex=None, server_assignor=None,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple((n, bytes(m)) for n, m in protocols)))
        written: list[records.Record] = []
        before = group.snapshot()
        reconciled = coordinator.update_and_reconcile(group, member, updated, self._names_to_ids(subscription.owned),
                                                      written)
        try:
            await coordinator.write_or_revert(group, before, written)
        except KafkaApiError as exc:
            return JoinGroupResult(member_id, exc.error)
        return JoinGroupResult(member_id, Errors.NONE, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE,
                               self._protocol_name(group, reconciled), leader_id="")

    # --- SyncGroup --------------------------------------------------------------------------------------
    def sync(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None) -> SyncGroupResult:
        try:
            member = self._current(group, member_id, instance_id, generation_id)
        except KafkaApiError as exc:
            return SyncGroupResult(exc.error)
        if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
            return SyncGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
        name = self._protocol_name(group, member)
        if protocol_name is not None and protocol_name != name:
            return SyncGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
        self.coordinator.schedule_timers(group, member)
        return SyncGroupResult(Errors.NONE, CONSUMER_PROTOCOL_TYPE, name,
                               encode_assignment(self._ids_to_names(member.assigned)))

    def _current(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                 generation_id: int) -> ConsumerGroupMember:
        member = group.member(member_id)
        if instance_id is not None:
            static = group.static_member(instance_id)
            if static is not None and static.member_id != member_id:
                raise KafkaApiError(Errors.FENCED_INSTANCE_ID)
        if member is None or member.classic is None:
            raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID)
        if generation_id != member.member_epoch:
            raise KafkaApiError(Errors.ILLEGAL_GENERATION)
        return member

    # --- Heartbeat ---------------------------------------------------------------------------------------
    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> Errors:
        """NONE while the member has nothing to reconcile, REBALANCE_IN_PROGRESS (join again) otherwise."""
        try:
            member = self._current(group, member_id, instance_id, generation_id)
        except KafkaApiError as exc:
            return exc.error
        coordinator = self.coordinator
        written: list[records.Record] = []
        coordinator.ensure_target_assignment(group, written)
        if written:
            coordinator.classic.track([asyncio.get_running_loop().create_task(
                coordinator.write_quietly(group.group_id, written))])
        coordinator.schedule_timers(group, member)
        settled = member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch \
            and group.target_assignment.get(member_id, {}) == member.assigned
        return Errors.NONE if settled else Errors.REBALANCE_IN_PROGRESS

    # --- LeaveGroup -------------------------------------------------------------------------------------
    def leave(self, group: ConsumerGroup, leaving: list[tuple[str, str | None]]) -> list[Errors]:
        coordinator = self.coordinator
        errors = []
        written: list[records.Record] = []
        for member_id, instance_id in leaving:
            member = group.static_member(instance_id) if instance_id is not None else group.member(member_id)
            if member is None:
                errors.append(Errors.UNKNOWN_MEMBER_ID)
            elif instance_id is not None and member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id:
                errors.append(Errors.FENCED_INSTANCE_ID)
            else:
                coordinator.remove(group, member.member_id, written)
                errors.append(Errors.NONE)
        if written:
            coordinator.after_members_left(group, written)
        return errors
