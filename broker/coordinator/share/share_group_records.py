"""A share group's records in ``__consumer_offsets``, as Kafka 4.2 writes them, and their replay.

The layout is the consumer group's (``consumer_group_records``): an int16 record type before the
key fields, an int16 version before the value fields, ``None`` for a tombstone. A share group is
its member metadata (10), its epoch and metadata hash (11), the target assignment's epoch (12)
and each member's part of it (13), each member's current assignment (14), and the topics whose
share-partitions have state (15: what deleting the group must delete at the share coordinators).
Replaying them in log order rebuilds the groups (``ShareGroupReplay``); a member that goes is
tombstoned in all its records and a deleted group in all of its own.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.coordinator_records import Record, decode_record, encode_key, encode_value, record_type
from broker.coordinator.coordinator_records import topic_partitions as _topic_partitions
from broker.coordinator.share.share_group import (
    Assignment,
    ShareGroup,
    ShareGroupMember,
)
from protocol.messages import message_class

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15

_NAMES = {
    MEMBER_METADATA: "ShareGroupMemberMetadata",
    GROUP_METADATA: "ShareGroupMetadata",
    TARGET_ASSIGNMENT_METADATA: "ShareGroupTargetAssignmentMetadata",
    TARGET_ASSIGNMENT_MEMBER: "ShareGroupTargetAssignmentMember",
    CURRENT_MEMBER_ASSIGNMENT: "ShareGroupCurrentMemberAssignment",
    STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadata",
}
RECORD_TYPES = frozenset(_NAMES)
STABLE = 0  # MemberState.STABLE: share-group members are never anything else

# topic id -> (topic name, partitions) whose share-group state exists
InitializedTopics = dict[uuid.UUID, tuple[str, frozenset[int]]]


def _key(kind: int, **fields: Any) -> bytes:
    return encode_key(_NAMES[kind], kind, **fields)


def _value(kind: int, **fields: Any) -> bytes:
    return encode_value(_NAMES[kind], **fields)


def _assignment(entries: list[Any]) -> Assignment:
    return {e.topic_id: sorted(e.partitions) for e in entries if e.partitions}


# --- writing ---------------------------------------------------------------------------------------

def group_epoch_record(group: ShareGroup) -> Record:
    return (_key(GROUP_METADATA, group_id=group.group_id),
            _value(GROUP_METADATA, epoch=group.group_epoch, metadata_hash=group.metadata_hash))


def member_metadata_record(group_id: str, m: ShareGroupMember) -> Record:
    return (_key(MEMBER_METADATA, group_id=group_id, member_id=m.member_id), _value(
        MEMBER_METADATA, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=sorted(m.subscribed_topic_names)))


def target_assignment_records(group: ShareGroup, changed: dict[str, Assignment]) -> list[Record]:
    """Each member's changed part of a new target assignment, then the assignment's epoch."""
    cls = message_class("ShareGroupTargetAssignmentMemberValue").TopicPartition
    out = [(_key(TARGET_ASSIGNMENT_MEMBER, group_id=group.group_id, member_id=member_id),
            _value(TARGET_ASSIGNMENT_MEMBER, topic_partitions=_topic_partitions(cls, assignment)))
           for member_id, assignment in sorted(changed.items())]
    out.append((_key(TARGET_ASSIGNMENT_METADATA, group_id=group.group_id),
                _value(TARGET_ASSIGNMENT_METADATA, assignment_epoch=group.assignment_epoch)))
    return out


def current_assignment_record(group_id: str, m: ShareGroupMember) -> Record:
    cls = message_class("ShareGroupCurrentMemberAssignmentValue").TopicPartitions
    return (_key(CURRENT_MEMBER_ASSIGNMENT, group_id=group_id, member_id=m.member_id), _value(
        CURRENT_MEMBER_ASSIGNMENT, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=STABLE, assigned_partitions=_topic_partitions(cls, m.assignment)))


def state_partition_record(group: ShareGroup) -> Record:
    cls = message_class("ShareGroupStatePartitionMetadataValue").TopicPartitionsInfo
    initialized = [cls(topic_id=topic_id, topic_name=name, partitions=sorted(partitions))
                   for topic_id, (name, partitions) in sorted(group.initialized_topics.items(), key=lambda i: i[1][0])]
    return (_key(STATE_PARTITION_METADATA, group_id=group.group_id), _value(
        STATE_PARTITION_METADATA, initializing_topics=[], initialized_topics=initialized, deleting_topics=[]))


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """What removing a member writes: its current and target assignment and its metadata, deleted."""
    return [(_key(kind, group_id=group_id, member_id=member_id), None)
            for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]


def group_tombstones(group: ShareGroup) -> list[Record]:
    """Deleting an (empty) group: its state-partition metadata, then its epochs."""
    return [(_key(kind, group_id=group.group_id), None)
            for kind in (STATE_PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA, GROUP_METADATA)]


# --- replay ----------------------------------------------------------------------------------------

@dataclass
class _Partial:
    """One share group's records as the log left them."""

    epoch: tuple[int, int] | None = None  # (group epoch, metadata hash)
    assignment_epoch: int = 0
    members: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    currents: dict[str, Any] = field(default_factory=dict)
    initialized: InitializedTopics = field(default_factory=dict)


class ShareGroupReplay:
    """Replays share-group records while a ``__consumer_offsets`` partition loads."""

    def __init__(self) -> None:
        self.groups: dict[str, _Partial] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        kind = record_type(key)
        k, v = decode_record(_NAMES[kind], key, value)
        group = self.groups.setdefault(k.group_id, _Partial())
        if kind == GROUP_METADATA:
            if v is None:
                del self.groups[k.group_id]
            else:
                group.epoch = (v.epoch, v.metadata_hash)
        elif kind == MEMBER_METADATA:
            _set(group.members, k.member_id, v)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0 if v is None else v.assignment_epoch
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            _set(group.targets, k.member_id, None if v is None else _assignment(v.topic_partitions))
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            _set(group.currents, k.member_id, v)
        elif kind == STATE_PARTITION_METADATA:
            group.initialized = {} if v is None else {
                t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in v.initialized_topics}

    def build(self) -> list[ShareGroup]:
        built = []
        for group_id, partial in self.groups.items():
            if partial.epoch is None:
                continue
            group = ShareGroup(group_id, group_epoch=partial.epoch[0], metadata_hash=partial.epoch[1],
                               assignment_epoch=partial.assignment_epoch, target_assignment=dict(partial.targets),
                               initialized_topics=dict(partial.initialized))
            for member_id, meta in partial.members.items():
                current = partial.currents.get(member_id)
                group.members[member_id] = ShareGroupMember(
                    member_id, current.member_epoch if current else 0, meta.client_id, meta.client_host,
                    list(meta.subscribed_topic_names), rack_id=meta.rack_id,
                    assignment=_assignment(current.assigned_partitions) if current else {},
                    previous_member_epoch=current.previous_member_epoch if current else 0)
            built.append(group)
        return built


def _set(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value
