"""A consumer group's records in ``__consumer_offsets``, as Kafka 4.2 writes them, and their replay.

Kafka's coordinator records: the key is an int16 record type followed by the key fields, the
value an int16 version followed by the value fields (``None``: a tombstone). A group is:
its epoch (type 3), each member's metadata (5), the target assignment's epoch (6) and each
member's part of it (7), each member's current assignment (8) and each resolved regular
expression (16). Replaying them in log order rebuilds the group exactly (``ConsumerGroupReplay``);
a removed member is tombstoned in all of its records, so compaction keeps only what is live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.consumer.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.coordinator_records import Record, decode_record, encode_key, encode_value, record_type
from broker.coordinator.coordinator_records import topic_partitions as _topic_partitions
from protocol.messages import message_class

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

_NAMES = {
    GROUP_METADATA: "ConsumerGroupMetadata",
    PARTITION_METADATA: "ConsumerGroupPartitionMetadata",
    MEMBER_METADATA: "ConsumerGroupMemberMetadata",
    TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadata",
    TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMember",
    CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignment",
    REGULAR_EXPRESSION: "ConsumerGroupRegularExpression",
}
RECORD_TYPES = frozenset(_NAMES)


def _key(kind: int, **fields: Any) -> bytes:
    return encode_key(_NAMES[kind], kind, **fields)


def _value(kind: int, **fields: Any) -> bytes:
    return encode_value(_NAMES[kind], **fields)


def _assignment(entries: list[Any]) -> Assignment:
    return {e.topic_id: frozenset(e.partitions) for e in entries if e.partitions}


# --- writing ---------------------------------------------------------------------------------------

def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return (_key(GROUP_METADATA, group_id=group_id),
            _value(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash))


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> Record:
    value_cls = message_class("ConsumerGroupMemberMetadataValue")
    classic = None if m.classic is None else value_cls.ClassicMemberMetadata(
        session_timeout_ms=m.classic.session_timeout_ms,
        supported_protocols=[value_cls.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols])
    return (_key(MEMBER_METADATA, group_id=group_id, member_id=m.member_id), _value(
        MEMBER_METADATA, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
        server_assignor=m.server_assignor, classic_member_metadata=classic))


def target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    return (_key(TARGET_ASSIGNMENT_METADATA, group_id=group_id),
            _value(TARGET_ASSIGNMENT_METADATA, assignment_epoch=epoch))


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    cls = message_class("ConsumerGroupTargetAssignmentMemberValue").TopicPartition
    return (_key(TARGET_ASSIGNMENT_MEMBER, group_id=group_id, member_id=member_id),
            _value(TARGET_ASSIGNMENT_MEMBER, topic_partitions=_topic_partitions(cls, assignment)))


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> Record:
    cls = message_class("ConsumerGroupCurrentMemberAssignmentValue").TopicPartitions
    return (_key(CURRENT_MEMBER_ASSIGNMENT, group_id=group_id, member_id=m.member_id), _value(
        CURRENT_MEMBER_ASSIGNMENT, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=m.state.value, assigned_partitions=_topic_partitions(cls, m.assigned),
        partitions_pending_revocation=_topic_partitions(cls, m.pending_revocation)))


def regex_record(group_id: str, regex: str, topics: frozenset[str], version: int, timestamp: int) -> Record:
    return (_key(REGULAR_EXPRESSION, group_id=group_id, regular_expression=regex),
            _value(REGULAR_EXPRESSION, topics=sorted(topics), version=version, timestamp=timestamp))


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """What removing a member writes: its current and target assignment and its metadata, deleted."""
    return [(_key(record_type, group_id=group_id, member_id=member_id), None)
            for record_type in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]


def regex_tombstone(group_id: str, regex: str) -> Record:
    return _key(REGULAR_EXPRESSION, group_id=group_id, regular_expression=regex), None


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    """Deleting the group: every member's records, its regular expressions, then its epochs."""
    out: list[Record] = []
    for member_id in group.members:
        out += member_tombstones(group.group_id, member_id)
    out += [regex_tombstone(group.group_id, regex) for regex in group.resolved_regexes]
    out += [(_key(TARGET_ASSIGNMENT_METADATA, group_id=group.group_id), None),
            (_key(GROUP_METADATA, group_id=group.group_id), None)]
    return out


def group_records(group: ConsumerGroup) -> list[Record]:
    """The whole group as records (a group converted from a classic one is written in full)."""
    gid = group.group_id
    out = [group_epoch_record(gid, group.group_epoch, group.metadata_hash)]
    out += [member_metadata_record(gid, m) for m in group.members.values()]
    out += [target_assignment_record(gid, m, a) for m, a in group.target_assignment.items()]
    out.append(target_assignment_epoch_record(gid, group.assignment_epoch))
    out += [current_assignment_record(gid, m) for m in group.members.values()]
    return out


# --- replay ----------------------------------------------------------------------------------------

@dataclass
class _Partial:
    """One group's records as the log left them (None: tombstoned)."""

    epoch: tuple[int, int] | None = None  # (group epoch, metadata hash)
    assignment_epoch: int | None = None
    members: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    currents: dict[str, Any] = field(default_factory=dict)
    regexes: dict[str, frozenset[str]] = field(default_factory=dict)


class ConsumerGroupReplay:
    """Replays consumer-group records while a ``__consumer_offsets`` partition loads."""

    def __init__(self) -> None:
        self.groups: dict[str, _Partial] = {}
        self.deleted: set[str] = set()

    def apply(self, key: bytes, value: bytes | None) -> None:
        kind = record_type(key)
        k, v = decode_record(_NAMES[kind], key, value)
        group = self.groups.setdefault(k.group_id, _Partial())
        if kind == GROUP_METADATA:
            group.epoch = None if v is None else (v.epoch, v.metadata_hash)
            if v is None:
                self.groups.pop(k.group_id, None)
                self.deleted.add(k.group_id)
            else:
                self.deleted.discard(k.group_id)
        elif kind == MEMBER_METADATA:
            self._set(group.members, k.member_id, v)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = None if v is None else v.assignment_epoch
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            self._set(group.targets, k.member_id, None if v is None else _assignment(v.topic_partitions))
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            self._set(group.currents, k.member_id, v)
        elif kind == REGULAR_EXPRESSION:
            self._set(group.regexes, k.regular_expression, None if v is None else frozenset(v.topics))
        # PARTITION_METADATA: Kafka 4.1+ keeps a metadata hash in the epoch record instead.

    @staticmethod
    def _set(target: dict[str, Any], key: str, value: Any) -> None:
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value

    def build(self) -> list[ConsumerGroup]:
        built = []
        for group_id, partial in self.groups.items():
            if partial.epoch is None:
                continue
            group = ConsumerGroup(group_id, group_epoch=partial.epoch[0], metadata_hash=partial.epoch[1],
                                  assignment_epoch=partial.assignment_epoch or 0,
                                  target_assignment=dict(partial.targets), resolved_regexes=dict(partial.regexes))
            for member_id, meta in partial.members.items():
                current = partial.currents.get(member_id)
                group.update_member(ConsumerGroupMember(
                    member_id=member_id, instance_id=meta.instance_id, rack_id=meta.rack_id,
                    client_id=meta.client_id, client_host=meta.client_host,
                    subscribed_topic_names=tuple(meta.subscribed_topic_names),
                    subscribed_topic_regex=meta.subscribed_topic_regex, server_assignor=meta.server_assignor,
                    rebalance_timeout_ms=meta.rebalance_timeout_ms,
                    member_epoch=current.member_epoch if current else 0,
                    previous_member_epoch=current.previous_member_epoch if current else 0,
                    state=MemberState.from_record(current.state) if current else MemberState.STABLE,
                    assigned=_assignment(current.assigned_partitions) if current else {},
                    pending_revocation=_assignment(current.partitions_pending_revocation) if current else {},
                    classic=None if meta.classic_member_metadata is None else ClassicMemberMetadata(
                        meta.classic_member_metadata.session_timeout_ms,
                        tuple((p.name, bytes(p.metadata)) for p in meta.classic_member_metadata.supported_protocols))))
            group.update_state()
            built.append(group)
        return built

