"""Share-group membership (ShareGroupCoordinator), the simple assignor and share sessions."""

from __future__ import annotations

import asyncio
import uuid

from broker.coordinator.share import share_group_records as share_records
from broker.coordinator.share.share_group import simple_assign
from broker.coordinator.share.share_group_coordinator import HeartbeatResult, ShareGroupCoordinator, ShareGroupSettings
from broker.share.share_session_cache import ShareSessionCache, next_epoch
from protocol.errors import Errors

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"t1": (T1, 3), "t2": (T2, 1)}


def _coordinator(max_size: int = 3, classic: frozenset[str] = frozenset()) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareGroupSettings(session_timeout_ms=1000, max_size=max_size),
                                 TOPICS.get, lambda group: group in classic)


def _beat(coordinator: ShareGroupCoordinator, *args: object, **kwargs: object) -> HeartbeatResult:
    return asyncio.run(coordinator.heartbeat(*args, **kwargs))  # type: ignore[arg-type]


def test_simple_assignor_covers_every_partition_and_shares_when_members_outnumber_them():
    assert simple_assign({"a": ["t1"], "b": ["t1"]}, TOPICS) == {"a": {T1: [0, 2]}, "b": {T1: [1]}}
    many = simple_assign({m: ["t2"] for m in "abc"}, TOPICS)
    assert many == {"a": {T2: [0]}, "b": {T2: [0]}, "c": {T2: [0]}}
    assert simple_assign({"a": ["t1", "t2"], "b": ["t2"]}, TOPICS) == {"a": {T1: [0, 1, 2], T2: [0]}, "b": {T2: [0]}}


def test_join_heartbeat_leave_and_epochs():
    coordinator = _coordinator()
    joined = _beat(coordinator, "g", "a", 0, None, ["t1"], "c", "/h", now_ms=0)
    assert joined.error is Errors.NONE and joined.member_epoch == 1  # one bump per heartbeat
    assert joined.assignment == {T1: [0, 1, 2]}
    same = _beat(coordinator, "g", "a", joined.member_epoch, None, None, "c", "/h", now_ms=10)
    assert same.assignment is None and same.member_epoch == joined.member_epoch  # nothing changed
    second = _beat(coordinator, "g", "b", 0, None, ["t1"], "c", "/h", now_ms=20)
    assert second.member_epoch == 2 and second.assignment == {T1: [1]}
    moved = _beat(coordinator, "g", "a", joined.member_epoch, None, None, "c", "/h", now_ms=30)
    assert moved.member_epoch == 2 and moved.assignment == {T1: [0, 2]}
    left = _beat(coordinator, "g", "b", -1, None, None, "c", "/h", now_ms=40)
    assert left.member_epoch == -1 and set(coordinator.groups["g"].members) == {"a"}


def test_heartbeat_errors_change_nothing():
    coordinator = _coordinator(max_size=1, classic=frozenset({"classic"}))
    epoch = _beat(coordinator, "g", "a", 0, None, ["t1"], "c", "/h", 0).member_epoch
    assert _beat(coordinator, "g", "x", 3, None, None, "c", "/h", 0).error is Errors.UNKNOWN_MEMBER_ID
    assert _beat(coordinator, "g", "a", epoch + 1, None, None, "c", "/h", 0).error is Errors.FENCED_MEMBER_EPOCH
    assert _beat(coordinator, "g", "b", 0, None, ["t1"], "c", "/h", 0).error is Errors.GROUP_MAX_SIZE_REACHED
    assert _beat(coordinator, "g", "", 0, None, ["t1"], "c", "/h", 0).error is Errors.INVALID_REQUEST
    assert _beat(coordinator, "g", "b", 0, None, [], "c", "/h", 0).error is Errors.INVALID_REQUEST
    assert _beat(coordinator, "g", "b", -2, None, None, "c", "/h", 0).error is Errors.INVALID_REQUEST
    assert _beat(coordinator, "classic", "b", 0, None, ["t1"], "c", "/h", 0).error is Errors.GROUP_ID_NOT_FOUND
    group = coordinator.groups["g"]
    assert set(group.members) == {"a"} and group.group_epoch == epoch and "classic" not in coordinator.groups


def test_members_that_stop_heartbeating_are_fenced_and_reported():
    coordinator = _coordinator()
    fenced: list[tuple[str, str]] = []
    coordinator.member_fenced_listeners.append(lambda g, m: fenced.append((g, m)))
    _beat(coordinator, "g", "a", 0, None, ["t1"], "c", "/h", now_ms=0)
    _beat(coordinator, "g", "b", 0, None, ["t1"], "c", "/h", now_ms=500)
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
        log += _beat(coordinator, "g", member, epoch, "r1", topics, "cid", "/h", now_ms=0).records
    log += _beat(coordinator, "g", "a", 1, None, None, "cid", "/h", now_ms=0).records
    log += _beat(coordinator, "g", "c", -1, None, None, "cid", "/h", now_ms=0).records
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


class _Log:
    """The coordinator's record writer: appends, or fails with ``failing`` as the log would."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.failing = Errors.NONE

    async def write(self, _group_id: str, written: list[tuple[bytes, bytes | None]]) -> Errors:
        if self.failing in (Errors.NONE, Errors.REQUEST_TIMED_OUT):  # a timeout comes after the append
            self.records += written
        return self.failing


def _state(coordinator: ShareGroupCoordinator, group_id: str = "g") -> tuple[object, ...]:
    group = coordinator.groups[group_id]
    return (group.group_epoch, group.assignment_epoch, dict(group.target_assignment), dict(group.initialized_topics),
            {m.member_id: (m.member_epoch, m.previous_member_epoch, m.assignment, list(m.subscribed_topic_names))
             for m in group.members.values()})


def test_a_change_whose_records_are_not_written_is_undone():
    coordinator, log = _coordinator(), _Log()
    coordinator.write = log.write
    joined = _beat(coordinator, "g", "a", 0, None, ["t1"], "c", "/h", now_ms=0)
    settled = _state(coordinator)
    # Kafka's runtime answers a failed append as its coordinator errors, without a message
    for failure, answer in ((Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
                            (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE)):
        log.failing = failure
        join = _beat(coordinator, "g", "b", 0, None, ["t1", "t2"], "c", "/h", now_ms=1)
        assert (join.error, join.message) == (answer, None)
        leave = _beat(coordinator, "g", "a", -1, None, None, "c", "/h", now_ms=1)
        assert (leave.error, leave.message) == (answer, None)
        assert _state(coordinator) == settled
        assert _beat(coordinator, "new", "x", 0, None, ["t1"], "c", "/h", now_ms=1).error is answer
        assert "new" not in coordinator.groups
    log.failing = Errors.NONE
    # the member still has the epoch it knows, and the group goes on from where its log is
    again = _beat(coordinator, "g", "a", joined.member_epoch, None, None, "c", "/h", now_ms=2)
    assert again.error is Errors.NONE and again.member_epoch == joined.member_epoch
    assert _beat(coordinator, "g", "b", 0, None, ["t1"], "c", "/h", now_ms=3).member_epoch == joined.member_epoch + 1
    replay = share_records.ShareGroupReplay()
    for key, value in log.records:
        replay.apply(key, value)
    [loaded] = replay.build()
    assert (loaded.group_epoch, set(loaded.members)) == (coordinator.groups["g"].group_epoch, {"a", "b"})


def test_a_change_whose_records_were_appended_but_not_replicated_in_time_stands():
    """REQUEST_TIMED_OUT comes after the records reached the leader's log: the member is answered
    COORDINATOR_NOT_AVAILABLE and retries, but memory keeps the change, so it never holds less than
    the log (which would let a later join be given the same partitions)."""
    coordinator, log = _coordinator(), _Log()
    coordinator.write = log.write
    _beat(coordinator, "g", "a", 0, None, ["t1"], "c", "/h", now_ms=0)
    log.failing = Errors.REQUEST_TIMED_OUT
    join = _beat(coordinator, "g", "b", 0, None, ["t1"], "c", "/h", now_ms=1)
    assert (join.error, join.message) == (Errors.COORDINATOR_NOT_AVAILABLE, None)
    assert _beat(coordinator, "new", "x", 0, None, ["t1"], "c", "/h", now_ms=1).error is Errors.COORDINATOR_NOT_AVAILABLE
    log.failing = Errors.NONE
    replay = share_records.ShareGroupReplay()
    for key, value in log.records:
        replay.apply(key, value)
    loaded = {group.group_id: group for group in replay.build()}
    assert set(loaded["g"].members) == set(coordinator.groups["g"].members) == {"a", "b"}
    assert loaded["g"].group_epoch == coordinator.groups["g"].group_epoch
    assert set(loaded["new"].members) == set(coordinator.groups["new"].members) == {"x"}
    retried = _beat(coordinator, "g", "b", 0, None, ["t1"], "c", "/h", now_ms=2)  # the member retries its join
    assert retried.error is Errors.NONE and set(coordinator.groups["g"].members) == {"a", "b"}


def test_changes_in_flight_together_are_undone_together():
    """A failed write does not undo a later change still being written (its write decides); when that
    one fails too, the group goes back to before the first, as Kafka's runtime to its last committed state."""
    coordinator = _coordinator()
    release: asyncio.Future[Errors] | None = None
    settled: list[tuple[object, ...]] = []

    async def write(_group_id: str, _written: list[tuple[bytes, bytes | None]]) -> Errors:
        return Errors.NONE if release is None else await release

    async def run() -> tuple[HeartbeatResult, HeartbeatResult]:
        nonlocal release
        coordinator.write = write
        await coordinator.heartbeat("g", "a", 0, None, ["t1"], "c", "/h", 0)
        settled.append(_state(coordinator))
        release = asyncio.get_running_loop().create_future()
        first = asyncio.ensure_future(coordinator.heartbeat("g", "b", 0, None, ["t1"], "c", "/h", 1))
        second = asyncio.ensure_future(coordinator.heartbeat("g", "c", 0, None, ["t1"], "c", "/h", 1))
        await asyncio.sleep(0)
        assert set(coordinator.groups["g"].members) == {"a", "b", "c"}  # both applied, both being written
        release.set_result(Errors.NOT_LEADER_OR_FOLLOWER)
        return await first, await second

    first, second = asyncio.run(run())
    assert first.error is second.error is Errors.NOT_COORDINATOR
    assert _state(coordinator) == settled[0]


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
