"""GroupMetadata's state machine, protocol selection and member bookkeeping."""
from __future__ import annotations

import asyncio
import struct

import pytest

from broker.coordinator.group.group_metadata import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    IllegalGroupStateTransition,
    JoinGroupResult,
    MemberMetadata,
    OffsetAndMetadata,
    parse_subscribed_topics,
)
from protocol.errors import Errors

S = GroupState


def _member(member_id: str, protocols: list[str], instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", 30000, 10000, "consumer",
                          [(p, p.encode()) for p in protocols])


def _subscription(*topics: str, version: int = 1) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)  # null user data


@pytest.mark.parametrize("target", list(GroupState))
def test_every_transition_outside_kafkas_table_is_refused(target: GroupState) -> None:
    for source in GroupState:
        group = GroupMetadata("g", source)
        if source in VALID_PREVIOUS_STATES[target]:
            group.transition_to(target)
            assert group.state is target
        else:
            with pytest.raises(IllegalGroupStateTransition, match=target.value):
                group.transition_to(target)
            assert group.state is source


def test_a_full_rebalance_cycle_walks_the_named_states() -> None:
    group = GroupMetadata("g")
    assert group.can_rebalance()
    for state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.PREPARING_REBALANCE, S.EMPTY, S.DEAD):
        group.transition_to(state)
    assert not group.can_rebalance()


def test_protocol_selection_takes_the_most_voted_common_protocol() -> None:
    group = GroupMetadata("g")
    group.add(_member("a", ["range", "roundrobin"]))
    group.add(_member("b", ["roundrobin", "range", "sticky"]))
    group.add(_member("c", ["roundrobin", "sticky"]))
    assert group.candidate_protocols() == {"roundrobin"}
    assert group.select_protocol() == "roundrobin"
    assert group.supports_protocols("consumer", [("roundrobin", b"")])
    assert not group.supports_protocols("consumer", [("range", b"")])
    assert not group.supports_protocols("connect", [("roundrobin", b"")])


def test_an_empty_group_accepts_any_non_empty_protocol_list() -> None:
    group = GroupMetadata("g")
    assert group.supports_protocols("consumer", [("range", b"")])
    assert not group.supports_protocols("consumer", [])
    assert not group.supports_protocols("", [("range", b"")])


def test_leader_moves_when_the_leader_leaves() -> None:
    group = GroupMetadata("g")
    group.add(_member("a", ["range"]))
    group.add(_member("b", ["range"]))
    assert group.leader_id == "a" and group.protocol_type == "consumer"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None and group.size == 0


def test_replacing_a_static_member_fences_the_old_id_and_keeps_the_assignment() -> None:
    async def run() -> None:
        group = GroupMetadata("g")
        old = _member("old", ["range"], instance="i-1")
        old.assignment = b"assigned"
        waiting: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        group.add(old, waiting)
        replaced = group.replace_static_member("i-1", "old", "new")
        assert waiting.result().error is Errors.FENCED_INSTANCE_ID
        assert replaced.member_id == "new" and replaced.assignment == b"assigned"
        assert group.leader_id == "new" and group.static_members == {"i-1": "new"}
        assert group.is_static_member_fenced("i-1", "old")
        assert not group.is_static_member_fenced("i-1", "new")
        assert not group.is_static_member_fenced(None, "old")

    asyncio.run(run())


def test_all_members_joined_counts_pending_members() -> None:
    async def run() -> None:
        group = GroupMetadata("g")
        group.add(_member("a", ["range"]), asyncio.get_running_loop().create_future())
        assert group.has_all_members_joined()
        group.pending_members.add("b")
        assert not group.has_all_members_joined()
        group.add(_member("b", ["range"]))
        assert not group.has_all_members_joined()  # b is a member now, but not awaiting a join
        assert [m.member_id for m in group.not_yet_rejoined()] == ["b"]

    asyncio.run(run())


def test_subscription_topics_parse_every_subscription_version() -> None:
    assert parse_subscribed_topics(_subscription("a", "b", version=0)) == {"a", "b"}
    assert parse_subscribed_topics(_subscription("t", version=3)) == {"t"}
    assert parse_subscribed_topics(b"\x00") is None
    assert parse_subscribed_topics(struct.pack(">hih", 0, 1, 50) + b"x") is None


def test_next_generation_computes_subscribed_topics_of_a_consumer_group() -> None:
    group = GroupMetadata("g")
    for name, topics in (("a", ["t1"]), ("b", ["t1", "t2"])):
        member = _member(name, [])
        member.supported_protocols = [("range", _subscription(*topics))]
        group.add(member)
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert group.state is S.COMPLETING_REBALANCE and group.generation_id == 1
    assert group.protocol_name == "range" and group.subscribed_topics == {"t1", "t2"}
    assert group.is_subscribed_to_topic("t2") and not group.is_subscribed_to_topic("t3")


def test_empty_group_offsets_expire_retention_after_it_became_empty() -> None:
    group = GroupMetadata("g")
    group.protocol_type = "consumer"
    group.offsets[("t", 0)] = OffsetAndMetadata(5, -1, "", commit_timestamp=0)
    group.state_timestamp = 1_000
    assert group.remove_expired_offsets(current_ms=1_500, retention_ms=1_000) == {}
    removed = group.remove_expired_offsets(current_ms=2_000, retention_ms=1_000)
    assert list(removed) == [("t", 0)] and not group.offsets


def test_simple_consumer_offsets_expire_by_commit_time_and_explicit_expiry() -> None:
    group = GroupMetadata("g")
    group.offsets[("t", 0)] = OffsetAndMetadata(1, -1, "", commit_timestamp=100)
    group.offsets[("t", 1)] = OffsetAndMetadata(1, -1, "", commit_timestamp=100, expire_timestamp=10_000)
    group.pending_offset_commits[("t", 2)] = group.offsets[("t", 2)] = OffsetAndMetadata(1, -1, "", 0)
    removed = group.remove_expired_offsets(current_ms=5_000, retention_ms=1_000)
    assert set(removed) == {("t", 0)}
    assert set(group.offsets) == {("t", 1), ("t", 2)}
