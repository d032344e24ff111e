"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

An assignor sees each member's subscribed topics and current target assignment, and the
partition counts of the subscribed topics, and returns every member's new target assignment.
Both are pure functions; the coordinator runs them when the group epoch moves past the
assignment epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.coordinator.consumer.consumer_group import Assignment

Partition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class MemberSubscription:
    topic_ids: frozenset[uuid.UUID]
    current: Assignment  # the member's previous target assignment (for stickiness)


class ConsumerGroupPartitionAssignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSubscription],
               partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]: ...


def _as_assignment(owned: Mapping[str, set[Partition]]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {}
    for member_id, partitions in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, p in partitions:
            by_topic.setdefault(topic_id, set()).add(p)
        result[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return result


class UniformAssignor:
    """Spreads the partitions as evenly as the subscriptions allow and moves as few as it can
    (Kafka's UniformAssignor): a member keeps what it had while that keeps the group balanced, the
    rest go to the least loaded members that subscribe to them, and partitions then move from
    a member with two more than another that could take them until none can."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSubscription],
               partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        owned: dict[str, set[Partition]] = {m: set() for m in members}
        eligible: dict[Partition, list[str]] = {}
        for member_id in sorted(members):
            for topic_id in members[member_id].topic_ids:
                for p in range(partition_counts.get(topic_id, 0)):
                    eligible.setdefault((topic_id, p), []).append(member_id)
        quota = -(-len(eligible) // max(len(members), 1))  # the most any member needs in the even case
        unassigned: list[Partition] = []
        for partition in sorted(eligible, key=lambda tp: (str(tp[0]), tp[1])):
            keeper = next((m for m in sorted(members) if partition[1] in members[m].current.get(partition[0], ())
                           and m in eligible[partition] and len(owned[m]) < quota), None)
            if keeper is None:
                unassigned.append(partition)
            else:
                owned[keeper].add(partition)
        for partition in unassigned:
            target = min(eligible[partition], key=lambda m: (len(owned[m]), m))
            owned[target].add(partition)
        self._balance(owned, eligible)
        return _as_assignment(owned)

    @staticmethod
    def _balance(owned: dict[str, set[Partition]], eligible: Mapping[Partition, list[str]]) -> None:
        moved = True
        while moved:
            moved = False
            for member_id in sorted(owned, key=lambda m: -len(owned[m])):
                for partition in sorted(owned[member_id], key=lambda tp: (str(tp[0]), tp[1])):
                    taker = min(eligible[partition], key=lambda m: (len(owned[m]), m))
                    if len(owned[member_id]) - len(owned[taker]) > 1:
                        owned[member_id].discard(partition)
                        owned[taker].add(partition)
                        moved = True
                        break
                if moved:
                    break


class RangeAssignor:
    """Per topic, consecutive ranges of partitions to the subscribed members in member id order,
    the first ones one more when the count does not divide (Kafka's RangeAssignor): members
    subscribing to co-partitioned topics get the same partition numbers of each."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSubscription],
               partition_counts: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        owned: dict[str, set[Partition]] = {m: set() for m in members}
        topics = {t for m in members.values() for t in m.topic_ids}
        for topic_id in topics:
            subscribers = sorted(m for m, s in members.items() if topic_id in s.topic_ids)
            count = partition_counts.get(topic_id, 0)
            share, extra = divmod(count, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                size = share + (1 if i < extra else 0)
                owned[member_id].update((topic_id, p) for p in range(start, start + size))
                start += size
        return _as_assignment(owned)


ASSIGNORS: dict[str, ConsumerGroupPartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def configured_assignors(names: list[str]) -> dict[str, ConsumerGroupPartitionAssignor]:
    """group.consumer.assignors (Kafka's class names or the short names), in order; the first is
    the default. Unknown names are a configuration error."""
    chosen: dict[str, ConsumerGroupPartitionAssignor] = {}
    for name in names:
        short = _CLASS_NAMES.get(name, name)
        if short not in ASSIGNORS:
            raise ValueError(f"group.consumer.assignors: unknown assignor {name!r} "
                             f"(this broker has {', '.join(sorted(ASSIGNORS))})")
        chosen[short] = ASSIGNORS[short]
    return chosen
