"""One classic group's state (Kafka's GroupMetadata and MemberMetadata).

The group moves between named states only along Kafka's valid transitions
(``transition_to`` raises ``IllegalGroupStateTransition`` otherwise). Members waiting on a
JoinGroup or SyncGroup answer hold an asyncio future that the coordinator completes; the
group is touched only from the event loop, so it needs no lock.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from protocol.errors import Errors
from storage.clock import now_ms

if TYPE_CHECKING:
    from broker.coordinator.consumer.consumer_group import ConsumerGroup

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
CONSUMER_PROTOCOL_TYPE = "consumer"

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    """Kafka's names, as DescribeGroups and ListGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
}


class IllegalGroupStateTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None  # only from OffsetCommit v2-v4 retention_time_ms / value v1


@dataclass(slots=True)
class PendingTxnOffset:
    """A transactional offset commit waiting for its transaction's marker (Kafka's
    CommitRecordMetadataAndOffset): ``record_offset`` is where its record landed, once appended."""

    offset: OffsetAndMetadata
    record_offset: int | None = None


@dataclass(frozen=True)
class JoinGroupResult:
    member_id: str
    error: Errors
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class MemberMetadata:
    """A member as the coordinator tracks it between heartbeats."""

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = b""
        self.awaiting_join: asyncio.Future[JoinGroupResult] | None = None
        self.awaiting_sync: asyncio.Future[SyncGroupResult] | None = None
        self.is_new = False
        self.heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocols(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.supported_protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of the candidate protocols")

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None

    def __repr__(self) -> str:
        return f"MemberMetadata({self.member_id!r}, instance={self.group_instance_id!r})"


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp: int | None = now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        # The __consumer_offsets offset of the record each committed offset came from: a commit
        # only replaces one whose record is older (Kafka's olderThan); -1 when unknown.
        self.offset_record_offsets: dict[TopicPartition, int] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        # producer id -> its transactional commits, visible once a COMMIT marker is written
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, PendingTxnOffset]] = {}
        # Set when the group uses KIP-848's consumer protocol: its membership lives there, and this
        # entry keeps only its offsets (the classic state stays Empty).
        self.consumer_group: ConsumerGroup | None = None

    @property
    def state_name(self) -> str:
        """The state ListGroups reports: the consumer group's for a KIP-848 group."""
        return self.state.value if self.consumer_group is None else self.consumer_group.state.value

    @property
    def group_type(self) -> str:
        """ListGroups' and DescribeGroups' type: "consumer" (KIP-848) or "classic"."""
        return "classic" if self.consumer_group is None else "consumer"

    def __repr__(self) -> str:
        return f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id})"

    # --- state ------------------------------------------------------------------------------
    def is_in(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupStateTransition(
                f"Group {self.group_id} should be in one of {sorted(s.value for s in VALID_PREVIOUS_STATES[target])} "
                f"before moving to {target.value}, but it is {self.state.value}")
        self.state = target
        self.state_timestamp = now_ms()

    # --- members ----------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def member_error(self, member_id: str, group_instance_id: str | None, generation_id: int) -> Errors | None:
        """The checks SyncGroup, Heartbeat and OffsetCommit make of their sender, in Kafka's order:
        a fenced static instance, an unknown member, a stale generation."""
        if self.is_static_member_fenced(group_instance_id, member_id):
            return Errors.FENCED_INSTANCE_ID
        if not self.has(member_id):
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return Errors.ILLEGAL_GENERATION
        return None

    def add(self, member: MemberMetadata, awaiting_join: asyncio.Future[JoinGroupResult] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        member.awaiting_join = awaiting_join
        self.pending_members.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        if member is None:
            return None
        member.cancel_heartbeat()
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give a rejoining static member its new id, fencing whatever waits under the old one."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join(member, JoinGroupResult(old_member_id, Errors.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync(member, SyncGroupResult(Errors.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, awaiting_join: asyncio.Future[JoinGroupResult] | None) -> None:
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if awaiting_join is not None:
            self.maybe_invoke_join(member, JoinGroupResult(member.member_id, Errors.REBALANCE_IN_PROGRESS))
        member.awaiting_join = awaiting_join

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        future, member.awaiting_join = member.awaiting_join, None
        if future is not None and not future.done():
            future.set_result(result)

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        future, member.awaiting_sync = member.awaiting_sync, None
        if future is not None and not future.done():
            future.set_result(result)
            return True
        return False

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # --- protocols ----------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocols())
        for member in members[1:]:
            common &= set(member.protocols())
        return common

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A joiner must share the group's protocol type and one protocol every member supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and bool(
            self.candidate_protocols() & {name for name, _ in protocols})

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateTransition(f"Group {self.group_id} has no protocol every member supports")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            found = parse_subscribed_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # --- offsets ------------------------------------------------------------------------------
    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def _maybe_commit(self, tp: TopicPartition, offset: OffsetAndMetadata, record_offset: int) -> None:
        """Make ``offset`` the committed one unless the current one's record is newer in the log."""
        if tp not in self.offsets or self.offset_record_offsets.get(tp, -1) < record_offset:
            self.offsets[tp] = offset
            self.offset_record_offsets[tp] = record_offset

    def on_offset_commit_append(self, tp: TopicPartition, offset: OffsetAndMetadata, record_offset: int) -> None:
        if tp in self.pending_offset_commits:  # not removed meanwhile (offsets deleted)
            self._maybe_commit(tp, offset, record_offset)
        if self.pending_offset_commits.get(tp) is offset:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) is offset:
            del self.pending_offset_commits[tp]

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        pending = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for tp, offset in offsets.items():
            pending[tp] = PendingTxnOffset(offset)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition, offset: OffsetAndMetadata,
                                    record_offset: int) -> None:
        entry = self.pending_txn_offset_commits.get(producer_id, {}).get(tp)
        if entry is not None and entry.offset is offset:
            entry.record_offset = record_offset

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> None:
        """The producer's transaction ended: its offsets become committed (COMMIT) or vanish (ABORT)."""
        pending = self.pending_txn_offset_commits.pop(producer_id, {})
        if is_commit:
            for tp, entry in pending.items():
                if entry.record_offset is None:
                    raise RuntimeError(f"transactional offset commit of producer {producer_id} for {tp} in group "
                                       f"{self.group_id} completed before its record was appended")
                self._maybe_commit(tp, entry.offset, entry.record_offset)

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def has_pending_offset_commits(self, tp: TopicPartition) -> bool:
        """Offsets of ``tp`` not settled yet: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT."""
        return tp in self.pending_offset_commits or \
            any(tp in pending for pending in self.pending_txn_offset_commits.values())

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offset_commits)

    def remove_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_txn_offset_commits.values():
                pending.pop(tp, None)
            self.offset_record_offsets.pop(tp, None)
            if tp in self.offsets:
                removed[tp] = self.offsets.pop(tp)
        return removed

    def remove_expired_offsets(self, current_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's rules: an Empty group's offsets expire retention after it became Empty, a Stable
        consumer group's unsubscribed ones and a simple consumer's retention after their commit."""
        def expired(base: int | None, offset: OffsetAndMetadata) -> bool:
            if offset.expire_timestamp is not None:
                return current_ms >= offset.expire_timestamp
            return current_ms - (offset.commit_timestamp if base is None else base) >= retention_ms

        subscribed: set[str] = set()
        consumer = self.consumer_group
        if consumer is not None:
            base = consumer.state_timestamp if consumer.is_empty else None
            subscribed = set() if consumer.is_empty else consumer.subscribed_topic_names()
        elif self.protocol_type is not None and self.is_in(GroupState.EMPTY):
            base = self.state_timestamp
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None \
                and self.is_in(GroupState.STABLE):
            base, subscribed = None, self.subscribed_topics
        elif self.protocol_type is None:
            base = None
        else:
            return {}
        candidates = [tp for tp, offset in self.offsets.items()
                      if tp[0] not in subscribed and tp not in self.pending_offset_commits and expired(base, offset)]
        return self.remove_offsets(candidates)


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def parse_subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: they come first); None if unreadable."""
    try:
        pos = 2  # version
        (count,) = _INT32.unpack_from(metadata, pos)
        pos += 4
        topics = set()
        for _ in range(max(count, 0)):
            (length,) = _INT16.unpack_from(metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(bytes(metadata[pos:pos + length]).decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
