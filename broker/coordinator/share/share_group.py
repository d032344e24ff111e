"""A share group's membership and assignment (Kafka's ShareGroup, ShareGroupMember, SimpleAssignor).

Share groups follow KIP-848's shape without its revocation phase: the coordinator owns the
assignment, every membership or subscription change bumps the group epoch, and the ``simple``
assignor computes a new target assignment that members take at once (a partition may be shared
by several members, so nothing has to be revoked before another member gets it).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from broker.coordinator.group_changes import RevertibleGroup

# Assignment: topic id -> partitions
Assignment = dict[uuid.UUID, list[int]]


class ShareGroupState(Enum):
    """ListGroups/ShareGroupDescribe state names, as Kafka's ShareGroup.ShareGroupState."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    rack_id: str | None = None
    assignment: Assignment = field(default_factory=dict)
    session_deadline_ms: int = 0
    previous_member_epoch: int = 0


@dataclass
class ShareGroup(RevertibleGroup):
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # topic name -> (topic id, partition count) the last assignment was computed from; its hash is
    # what the group's epoch record keeps (a reloaded group recomputes the layout and compares)
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    metadata_hash: int = 0
    # member id -> assignment, computed once per assignment epoch
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    # topic id -> (name, partitions) of every share-partition the group was ever assigned: those
    # whose state deleting the group deletes (Kafka's ShareGroupStatePartitionMetadata)
    initialized_topics: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)

    def snapshot(self) -> ShareGroup:
        """The copy ``write_or_revert`` goes back to (members are changed in place, so each is copied)."""
        return replace(self, members={m: replace(member) for m, member in self.members.items()},
                       subscription_metadata=dict(self.subscription_metadata),
                       target_assignment=dict(self.target_assignment),
                       initialized_topics=dict(self.initialized_topics))

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {topic for member in self.members.values() for topic in member.subscribed_topic_names}


def simple_assign(members: Mapping[str, list[str]], topics: Mapping[str, tuple[uuid.UUID, int]]
                  ) -> dict[str, Assignment]:
    """Kafka's ``simple`` share assignor: every partition of every subscribed topic goes to at least
    one subscriber, and with more subscribers than partitions each partition is shared among them.

    Members are ordered by id, so every coordinator computes the same assignment.
    """
    result: dict[str, Assignment] = {member_id: {} for member_id in members}
    for topic, (topic_id, count) in sorted(topics.items()):
        subscribers = sorted(m for m, subscribed in members.items() if topic in subscribed)
        if not subscribers or count <= 0:
            continue
        if len(subscribers) <= count:
            for partition in range(count):
                owner = subscribers[partition % len(subscribers)]
                result[owner].setdefault(topic_id, []).append(partition)
        else:
            for index, member_id in enumerate(subscribers):
                result[member_id].setdefault(topic_id, []).append(index % count)
    return result
