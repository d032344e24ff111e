"""Share-group membership (ShareGroupCoordinator), the simple assignor and share sessions."""

from __future__ import annotations

import asyncio
import uuid

from broker.coordinator.share import share_group_records as share_records
from broker.coordinator.share.share_group import simple_assign
from broker.coordinator.share.share_group_coordinator import ShareGroupCoordinator, ShareGroupSettings
from broker.share.share_session_cache import ShareSessionCache, next_epoch
from protocol.errors import Errors

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"t1": (T1, 3), "t2": (T2, 1)}


def _coordinator(max_size: int = 3, classic: frozenset[str] = frozenset()) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareGroupSettings(session_timeout_ms=1000, max_size=max_size),
                                 TOPICS.get, lambda group: group in classic)


def test_simple_assignor_covers_every_partition_and_shares_when_members_outnumber_them():
    assert simple_assign({"a": ["t1"], "b": ["t1"]}, TOPICS) == {"a": {T1: [0, 2]}, "b": {T1: [1]}}
    many = simple_assign({m: ["t2"] for m in "abc"}, TOPICS)
    assert many == {"a": {T2: [0]}, "b": {T2: [0]}, "c": {T2: [0]}}
    assert simple_assign({"a": ["t1", "t2"], "b": ["t2"]}, TOPICS) == {"a": {T1: [0, 1, 2], T2: [0]}, "b": {T2: [0]}}


def test_join_heartbeat_leave_and_epochs():
    coordinator = _coordinator()
    joined = coordinator.heartbeat("g", "a", 0, None, ["t1"], "c", "/h", now_ms=0)
    assert joined.error is Errors.NONE and joined.member_epoch == 1  # one bump per heartbeat
    assert joined.assignment == {T1: [0, 1, 2]}
    same = coordinator.heartbeat("g", "a", joined.member_epoch, None, None, "c", "/h", now_ms=10)
    assert same.assignment is None and same.member_epoch == joined.member_epoch  # nothing changed
    second = coordinator.heartbeat("g", "b", 0, None, ["t1"], "c", "/h", now_ms=20)
    assert second.member_epoch == 2 and second.assignment == {T1: [1]}
    moved = coordinator.heartbeat("g", "a", joined.member_epoch, None, None, "c", "/h", now_ms=30)
    assert moved.member_epoch == 2 and moved.assignment == {T1: [0, 2]}
    left = coordinator.heartbeat("g", "b", -1, None, None, "c", "/h", now_ms=40)
    assert left.member_epoch == -1 and set(coordinator.groups["g"].members) == {"a"}


def test_heartbeat_errors_change_nothing():
    coordinator = _coordinator(max_size=1, classic=frozenset({"classic"}))
    epoch = coordinator.heartbeat("g", "a", 0, None, ["t1"], "c", "/h", 0).member_epoch
    assert coordinator.heartbeat("g", "x", 3, None, None, "c", "/h", 0).error is Errors.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("g", "a", epoch + 1, None, None, "c", "/h", 0).error is Errors.FENCED_MEMBER_EPOCH
    assert coordinator.heartbeat("g", "b", 0, None, ["t1"], "c", "/h", 0).error is Errors.GROUP_MAX_SIZE_REACHED
    assert coordinator.heartbeat("g", "", 0, None, ["t1"], "c", "/h", 0).error is Errors.INVALID_REQUEST
    assert coordinator.heartbeat("g", "b", 0, None, [], "c", "/h", 0).error is Errors.INVALID_REQUEST
    assert coordinator.heartbeat("g", "b", -2, None, None, "c", "/h", 0).error is Errors.INVALID_REQUEST
    assert coordinator.heartbeat("classic", "b", 0, None, ["t1"], "c", "/h", 0).error is Errors.GROUP_ID_NOT_FOUND
    group = coordinator.groups["g"]
    assert set(group.members) == {"a"} and group.group_epoch == epoch and "classic" not in coordinator.groups


def test_members_that_stop_heartbeating_are_fenced_and_reported():
    coordinator = _coordinator()
    fenced: list[tuple[str, str]] = []
    coordinator.member_fenced_listeners.append(lambda g, m: fenced.append((g, m)))
    coordinator.heartbeat("g", "a", 0, None, ["t1"], "c", "/h", now_ms=0)
    coordinator.heartbeat("g", "b", 0, None, ["t1"], "c", "/h", now_ms=500)
    assert coordinator.expire_sessions(999) == [] and coordinator.expire_sessions(1000) == [("g", "a")]
    assert fenced == [("g", "a")]
    assert asyncio.run(coordinator.delete_group("g")) == (Errors.NON_EMPTY_GROUP, None)
    coordinator.expire_sessions(2000)
    error, deleted = asyncio.run(coordinator.delete_group("g"))
    assert error is Errors.NONE and deleted.initialized_topics == {T1: ("t1", frozenset({0, 1, 2}))}
    assert asyncio.run(coordinator.delete_group("g")) == (Errors.GROUP_ID_NOT_FOUND, None)


def test_written_records_replay_into_the_same_group():
    coordinator = _coordinator()
    log: list[tuple[bytes, bytes | None]] = []
    for member, epoch, topics in (("a", 0, ["t1"]), ("b", 0, ["t1", "t2"]), ("c", 0, ["t2"])):
        log += coordinator.heartbeat("g", member, epoch, "r1", topics, "cid", "/h", now_ms=0).records
    log += coordinator.heartbeat("g", "a", 1, None, None, "cid", "/h", now_ms=0).records
    log += coordinator.heartbeat("g", "c", -1, None, None, "cid", "/h", now_ms=0).records
    replay = share_records.ShareGroupReplay()
    for key, value in log:
        replay.apply(key, value)
    [loaded] = replay.build()
    group = coordinator.groups["g"]
    assert (loaded.group_epoch, loaded.assignment_epoch, loaded.metadata_hash) == \
        (group.group_epoch, group.assignment_epoch, group.metadata_hash)
    assert loaded.initialized_topics == group.initialized_topics and set(loaded.members) == {"a", "b"}
    for member_id, member in group.members.items():
        got = loaded.members[member_id]
        assert (got.member_epoch, got.previous_member_epoch, got.assignment, got.rack_id, got.client_id,
                sorted(got.subscribed_topic_names)) == (member.member_epoch, member.previous_member_epoch,
                                                        member.assignment, "r1", "cid",
                                                        sorted(member.subscribed_topic_names))
    tombstoned = share_records.ShareGroupReplay()
    for key, value in log + share_records.group_tombstones(group):
        tombstoned.apply(key, value)
    assert tombstoned.build() == []


def test_share_sessions_epochs_forgotten_partitions_and_close():
    cache = ShareSessionCache(max_entries=2, eviction_ms=100)
    opened = cache.new_context("g", "a", 0, [(("t", 0), T1), (("t", 1), T1)], [], now_ms=0)
    assert opened.error is Errors.NONE and opened.session.epoch == 1
    assert cache.new_context("g", "a", 2, [], [], 0).error is Errors.INVALID_SHARE_SESSION_EPOCH
    assert cache.new_context("g", "b", 1, [], [], 0).error is Errors.SHARE_SESSION_NOT_FOUND
    updated = cache.new_context("g", "a", 1, [(("u", 0), T2)], [("t", 1)], 0)
    assert set(updated.session.partitions) == {("t", 0), ("u", 0)} and updated.session.epoch == 2
    assert cache.acknowledge_context("g", "a", 0, 0).error is Errors.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge_context("g", "a", 2, 0).session.epoch == 3
    closed = cache.new_context("g", "a", -1, [], [], 0)
    assert closed.closed and cache.get("g", "a") is None
    assert next_epoch(2**31 - 1) == 1


def test_a_full_cache_evicts_an_idle_session_or_refuses():
    cache = ShareSessionCache(max_entries=1, eviction_ms=100)
    cache.new_context("g", "a", 0, [], [], now_ms=0)
    assert cache.new_context("g", "b", 0, [], [], now_ms=50).error is Errors.SHARE_SESSION_LIMIT_REACHED
    assert cache.new_context("g", "b", 0, [], [], now_ms=100).error is Errors.NONE
    assert cache.get("g", "a") is None and len(cache) == 1
