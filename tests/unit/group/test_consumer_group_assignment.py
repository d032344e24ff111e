"""The KIP-848 assignors and the reconciliation of one member (pure logic, no broker)."""
from __future__ import annotations

import uuid

import pytest

from broker.coordinator.consumer.assignors import MemberSubscription, RangeAssignor, UniformAssignor
from broker.coordinator.consumer.consumer_group import NO_PARTITION_EPOCH, ConsumerGroupMember, MemberState
from broker.coordinator.consumer.current_assignment_builder import reconcile
from protocol.errors import KafkaApiError

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _sub(*topics: uuid.UUID, current: dict[uuid.UUID, frozenset[int]] | None = None) -> MemberSubscription:
    return MemberSubscription(frozenset(topics), current or {})


def _count(assignment: dict[uuid.UUID, frozenset[int]]) -> int:
    return sum(len(ps) for ps in assignment.values())


def test_uniform_balances_and_a_new_member_moves_only_its_share() -> None:
    first = UniformAssignor().assign({f"m{i}": _sub(T1) for i in range(3)}, {T1: 12})
    assert sorted(_count(a) for a in first.values()) == [4, 4, 4]
    members = {m: _sub(T1, current=a) for m, a in first.items()}
    members["m3"] = _sub(T1)
    second = UniformAssignor().assign(members, {T1: 12})
    assert sorted(_count(a) for a in second.values()) == [3, 3, 3, 3]
    moved = sum(len(first[m][T1] - second[m].get(T1, frozenset())) for m in first)
    assert moved == 3  # exactly what the new member gets
    every = [p for a in second.values() for p in a.get(T1, ())]
    assert sorted(every) == list(range(12))


def test_uniform_respects_different_subscriptions() -> None:
    result = UniformAssignor().assign({"a": _sub(T1), "b": _sub(T1, T2)}, {T1: 2, T2: 4})
    assert set(result["a"]) <= {T1}
    assert _count(result["a"]) + _count(result["b"]) == 6


def test_range_gives_co_partitioned_ranges() -> None:
    result = RangeAssignor().assign({"a": _sub(T1, T2), "b": _sub(T1, T2)}, {T1: 3, T2: 3})
    assert result["a"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["b"] == {T1: frozenset({2}), T2: frozenset({2})}


def _free(_: uuid.UUID, __: int) -> int:
    return NO_PARTITION_EPOCH


def test_a_member_revokes_before_it_moves_to_the_new_epoch() -> None:
    member = ConsumerGroupMember("m", member_epoch=1, assigned={T1: frozenset({0, 1})})
    revoking = reconcile(member, 2, {T1: frozenset({0})}, _free, owned={T1: frozenset({0, 1})})
    assert (revoking.state, revoking.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    assert revoking.assigned == {T1: frozenset({0})} and revoking.pending_revocation == {T1: frozenset({1})}
    # Still reporting partition 1: nothing moves.
    assert reconcile(revoking, 2, {T1: frozenset({0})}, _free, owned={T1: frozenset({0, 1})}) is revoking
    done = reconcile(revoking, 2, {T1: frozenset({0})}, _free, owned={T1: frozenset({0})})
    assert (done.state, done.member_epoch, done.previous_member_epoch) == (MemberState.STABLE, 2, 1)


def test_a_partition_still_owned_by_another_member_is_withheld() -> None:
    member = ConsumerGroupMember("m", member_epoch=1, assigned={})
    owned_elsewhere = reconcile(member, 2, {T1: frozenset({0, 1})}, lambda t, p: 1 if p == 1 else -1, owned={})
    assert owned_elsewhere.state is MemberState.UNRELEASED_PARTITIONS
    assert owned_elsewhere.assigned == {T1: frozenset({0})} and owned_elsewhere.member_epoch == 2
    released = reconcile(owned_elsewhere, 2, {T1: frozenset({0, 1})}, _free, owned={T1: frozenset({0})})
    assert released.state is MemberState.STABLE and released.assigned == {T1: frozenset({0, 1})}


def test_a_member_in_an_unknown_state_holding_partitions_is_fenced() -> None:
    member = ConsumerGroupMember("m", member_epoch=1, state=MemberState.UNKNOWN)
    with pytest.raises(KafkaApiError):
        reconcile(member, 2, {}, _free, owned={T1: frozenset({0})})


def test_a_group_goes_back_to_its_snapshot() -> None:
    from broker.coordinator.consumer.consumer_group import ConsumerGroup

    group = ConsumerGroup("g", group_epoch=1, assignment_epoch=1)
    group.update_member(ConsumerGroupMember("a", member_epoch=1, assigned={T1: frozenset({0})}))
    before = group.snapshot()
    group.update_member(ConsumerGroupMember("b", member_epoch=2, assigned={T1: frozenset({1})}))
    group.group_epoch = 2
    group.remove_member("a")
    group.restore(before)
    assert set(group.members) == {"a"} and group.group_epoch == 1
    assert group.partition_epochs == {T1: {0: 1}}


def test_replaying_a_compacted_log_gives_the_same_group() -> None:
    """The records a group's life writes, compacted (the last value of each key, tombstones gone),
    replay into the same group as the whole log: compaction keeps exactly what is live."""
    from broker.coordinator.consumer import consumer_group_records as records
    from broker.coordinator.consumer.consumer_group import ConsumerGroup

    a = ConsumerGroupMember("a", subscribed_topic_names=("t",), member_epoch=1, assigned={T1: frozenset({0, 1})})
    b = ConsumerGroupMember("b", subscribed_topic_names=("t",), member_epoch=2, assigned={T1: frozenset({1})})
    log = [records.group_epoch_record("g", 1, 7), records.member_metadata_record("g", a),
           records.target_assignment_record("g", "a", {T1: frozenset({0, 1})}),
           records.target_assignment_epoch_record("g", 1), records.current_assignment_record("g", a),
           records.member_metadata_record("g", b), records.group_epoch_record("g", 2, 7),
           records.target_assignment_record("g", "a", {T1: frozenset({0})}),
           records.target_assignment_record("g", "b", {T1: frozenset({1})}),
           records.target_assignment_epoch_record("g", 2), records.current_assignment_record("g", b),
           *records.member_tombstones("g", "a"), records.group_epoch_record("g", 3, 7),
           records.regex_record("g", "t.*", frozenset({"t"}), 1, 0), records.regex_tombstone("g", "t.*")]
    compacted: dict[bytes, bytes | None] = {}
    for key, value in log:
        compacted.pop(key, None)
        compacted[key] = value
    live = [(k, v) for k, v in compacted.items() if v is not None]

    def replay(entries: list[tuple[bytes, bytes | None]]) -> ConsumerGroup:
        replayer = records.ConsumerGroupReplay()
        for key, value in entries:
            replayer.apply(key, value)
        (group,) = replayer.build()
        return group

    whole, kept = replay(log), replay(live)
    assert (kept.group_epoch, kept.assignment_epoch, kept.members, kept.target_assignment, kept.resolved_regexes) == \
        (whole.group_epoch, whole.assignment_epoch, whole.members, whole.target_assignment, whole.resolved_regexes)
    assert set(kept.members) == {"b"} and len(live) < len(log)
