"""One KIP-848 consumer group's state (Kafka's ConsumerGroup and ConsumerGroupMember).

The coordinator owns the assignment: every membership change bumps the group epoch, the
target assignment is computed for that epoch, and each member then reconciles towards its
part of it one heartbeat at a time (``current_assignment_builder``). A partition is owned by at
most one member at a time: ``partition_epochs`` records, for every partition a member holds or
has still to revoke, the epoch of that member, and a partition in it is not given to another.
The state is touched only from the broker's event loop.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

from broker.coordinator.group_changes import RevertibleGroup
from protocol.errors import Errors, KafkaApiError
from storage.clock import now_ms

# Topic id -> partition indexes, as the records and the heartbeat carry an assignment.
Assignment = dict[uuid.UUID, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_PARTITION_EPOCH = -1


class ConsumerGroupState(enum.Enum):
    """Kafka's names, as ListGroups, DescribeGroups and ConsumerGroupDescribe report them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """Kafka's MemberState, with the byte the CurrentMemberAssignment record stores."""

    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3
    UNKNOWN = 127

    @classmethod
    def from_record(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member using the classic protocol inside a consumer group joined with."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, ConsumerProtocolSubscription bytes)


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member as the coordinator knows it; updates make a new one (Kafka's builder pattern)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None  # set for a member speaking the classic protocol

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def with_epoch(self, epoch: int, **changes: object) -> ConsumerGroupMember:
        """Kafka's updateMemberEpoch: the previous epoch is kept for a heartbeat whose answer was lost."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch, **changes)  # type: ignore[arg-type]

    def subscription_equals(self, other: ConsumerGroupMember) -> bool:
        return (self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex
                and self.server_assignor == other.server_assignor
                and self.rack_id == other.rack_id)


@dataclass
class ConsumerGroup(RevertibleGroup):
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    partition_epochs: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict)
    # The topics each of the group's regular expressions matched when last resolved.
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    # What the subscribed topics looked like (hash of names, ids and partition counts) when the
    # target assignment was last computed: a change (a topic created, deleted, grown) bumps the epoch.
    metadata_hash: int = 0
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    state_timestamp: int = field(default_factory=now_ms)

    # --- reverting a change whose records could not be written ------------------------------------
    def snapshot(self) -> ConsumerGroup:
        """The copy ``write_or_revert`` goes back to (members are immutable, so copying the
        containers is enough)."""
        return replace(self, members=dict(self.members), static_members=dict(self.static_members),
                       target_assignment=dict(self.target_assignment),
                       partition_epochs={t: dict(e) for t, e in self.partition_epochs.items()},
                       resolved_regexes=dict(self.resolved_regexes))

    # --- members ----------------------------------------------------------------------------
    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Install ``member`` (new or updated), keeping the partition epochs in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)
        self.update_state()

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
            self.target_assignment.pop(member_id, None)
            self.update_state()
        return member

    def _claim(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self.partition_epochs.setdefault(topic_id, {})
                for p in partitions:
                    epochs[p] = member.member_epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self.partition_epochs.get(topic_id)
                if epochs is None:
                    continue
                for p in partitions:
                    if epochs.get(p) == member.member_epoch:
                        del epochs[p]
                if not epochs:
                    del self.partition_epochs[topic_id]

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get(topic_id, {}).get(partition, NO_PARTITION_EPOCH)

    # --- subscriptions ----------------------------------------------------------------------
    def subscribed_topic_names(self) -> set[str]:
        """Every topic some member subscribes to by name or through a resolved regular expression."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def member_topics(self, member: ConsumerGroupMember) -> set[str]:
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            topics.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return topics

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex is not None}

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor)."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda name: counts[name])

    # --- state ------------------------------------------------------------------------------
    def update_state(self) -> None:
        """Kafka's maybeUpdateGroupState: derived from the members and the epochs."""
        if not self.members:
            new = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            new = ConsumerGroupState.ASSIGNING
        elif any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
                 for m in self.members.values()):
            new = ConsumerGroupState.RECONCILING
        else:
            new = ConsumerGroupState.STABLE
        if new is not self.state:
            self.state = new
            self.state_timestamp = now_ms()

    def mark_dead(self) -> None:
        self.state = ConsumerGroupState.DEAD
        self.state_timestamp = now_ms()

    @property
    def is_empty(self) -> bool:
        return not self.members

    # --- offsets ----------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int, transactional: bool = False) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit: an empty group takes commits without a member
        (admin tools), a transaction's without membership (TxnOffsetCommit v0-2 carries none);
        otherwise only a member at its current epoch commits."""
        if member_epoch < 0 and (self.is_empty or (transactional and not member_id)):
            return
        member = self.member(member_id)
        if member is None:
            raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        if api_version < 9 and not transactional and not member.uses_classic_protocol:
            raise KafkaApiError(Errors.UNSUPPORTED_VERSION,
                                "OffsetCommit version 9 or above must be used by members using the consumer group "
                                "protocol")
        if member_epoch != member.member_epoch:
            if member.uses_classic_protocol:  # a classic member's generation is its member epoch
                raise KafkaApiError(Errors.ILLEGAL_GENERATION)
            raise KafkaApiError(Errors.STALE_MEMBER_EPOCH,
                                f"The received member epoch {member_epoch} does not match the expected member epoch "
                                f"{member.member_epoch}.")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: a fetch naming a member must come at its epoch."""
        if member_epoch < 0 and not member_id:
            return
        member = self.member(member_id or "")
        if member is None:
            raise KafkaApiError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        if member_epoch != member.member_epoch:
            raise KafkaApiError(Errors.STALE_MEMBER_EPOCH,
                                f"The received member epoch {member_epoch} does not match the expected member epoch "
                                f"{member.member_epoch}.")
