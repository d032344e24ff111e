"""Incremental reconciliation of one member towards its target assignment (Kafka's
CurrentAssignmentBuilder).

A member moves between MemberState values one heartbeat at a time: partitions it must give up
are first kept out of its assignment and awaited (UNREVOKED_PARTITIONS, same epoch) until its
heartbeat no longer reports them; only then does it move to the target epoch. Partitions of its
target still held by another member are withheld (UNRELEASED_PARTITIONS) until released. So a
partition is never owned by two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker.coordinator.consumer.consumer_group import NO_PARTITION_EPOCH, Assignment, ConsumerGroupMember, MemberState
from protocol.errors import Errors, KafkaApiError

OwnedPartitions = Assignment | None  # None: the heartbeat did not say (unchanged since the last one)


def _owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    if owned is None:
        return True
    return any(owned.get(topic_id, frozenset()) & ps for topic_id, ps in partitions.items())


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int], owned: OwnedPartitions) -> ConsumerGroupMember:
    """The member's next state, as Kafka's CurrentAssignmentBuilder.build."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, member.assigned, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, member.assigned, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, member.assigned, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise KafkaApiError(Errors.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                            "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, member.assigned, target_epoch, target, partition_epoch, owned)


def _next(member: ConsumerGroupMember, epoch: int, current: Assignment, target_epoch: int, target: Assignment,
          partition_epoch: Callable[[uuid.UUID, int], int], owned: OwnedPartitions) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset())
        had = current.get(topic_id, frozenset())
        keep = had & wanted
        if keep:
            assigned[topic_id] = set(keep)
        if had - keep:
            revoking[topic_id] = frozenset(had - keep)
        free = {p for p in wanted - keep if partition_epoch(topic_id, p) == NO_PARTITION_EPOCH}
        unreleased = unreleased or len(free) < len(wanted - keep)
        if free:
            pending[topic_id] = free
    frozen = lambda parts: {t: frozenset(ps) for t, ps in parts.items()}  # noqa: E731
    if revoking and _owns_any(owned, revoking):
        return member.with_epoch(epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=frozen(assigned),
                                 pending_revocation=revoking)
    for topic_id, partitions in pending.items():
        assigned.setdefault(topic_id, set()).update(partitions)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned=frozen(assigned), pending_revocation={})
