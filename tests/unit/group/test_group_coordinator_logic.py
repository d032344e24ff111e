"""The classic group protocol in GroupCoordinator, driven directly (no sockets, fake log)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from broker.coordinator.group.group_coordinator import GroupCoordinator
from broker.coordinator.group.group_metadata import GroupState, JoinGroupResult, OffsetAndMetadata
from broker.coordinator.group.group_operations import commit_offsets, delete_groups, describe_group, fetch_offsets
from protocol.errors import Errors
from tests.harness.waiting import wait_until
from tests.unit.group.group_fakes import coordinator

PROTOCOLS = [("range", b"sub")]


def _join(coord: GroupCoordinator, member_id: str = "", instance: str | None = None, session_ms: int = 10_000,
          protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
          group: str = "g") -> asyncio.Future[JoinGroupResult]:
    return coord.join_group(group, member_id, instance, require_known_member_id=True, support_skip_assignment=False,
                            client_id="c", client_host="/127.0.0.1", rebalance_timeout_ms=5_000,
                            session_timeout_ms=session_ms, protocol_type=protocol_type,
                            protocols=protocols or PROTOCOLS)


async def _member_joins(coord: GroupCoordinator, **kwargs: Any) -> asyncio.Future[JoinGroupResult]:
    """The v4+ round trip: MEMBER_ID_REQUIRED, then the join with the given id (still pending)."""
    first = await _join(coord, **kwargs)
    assert first.error is Errors.MEMBER_ID_REQUIRED and first.member_id.startswith("c-")
    return _join(coord, member_id=first.member_id, **kwargs)


def _run(test: Callable[[GroupCoordinator], Awaitable[None]], **overrides: Any) -> None:
    async def main() -> None:
        coord, _ = coordinator(**overrides)
        try:
            await test(coord)
        finally:
            coord.shutdown()

    asyncio.run(main())


async def _two_member_stable_group(coord: GroupCoordinator) -> tuple[str, str]:
    a = await (await _member_joins(coord))
    assert a.error is Errors.NONE and a.generation_id == 1 and a.leader_id == a.member_id
    assert (await coord.sync_group("g", 1, a.member_id, None, None, None, {a.member_id: b"A"})).assignment == b"A"
    b_join = await _member_joins(coord)
    assert coord.heartbeat("g", a.member_id, None, 1) is Errors.REBALANCE_IN_PROGRESS
    a_join = _join(coord, member_id=a.member_id)
    a2, b2 = await a_join, await b_join
    assert a2.generation_id == b2.generation_id == 2
    assert a2.leader_id == a.member_id and len(a2.members) == 2 and b2.members == []
    follower = coord.sync_group("g", 2, b2.member_id, None, None, None, {})
    assert not follower.done()  # waits for the leader's assignment
    leader = await coord.sync_group("g", 2, a.member_id, None, None, None, {a.member_id: b"A2", b2.member_id: b"B2"})
    assert leader.assignment == b"A2" and (await follower).assignment == b"B2"
    assert coord.manager.get_group("g").state is GroupState.STABLE  # type: ignore[union-attr]
    return a.member_id, b2.member_id


def test_join_sync_and_rebalance_when_a_second_member_arrives() -> None:
    async def test(coord: GroupCoordinator) -> None:
        await _two_member_stable_group(coord)
    _run(test)


def test_heartbeat_errors() -> None:
    async def test(coord: GroupCoordinator) -> None:
        a, _b = await _two_member_stable_group(coord)
        assert coord.heartbeat("g", a, None, 2) is Errors.NONE
        assert coord.heartbeat("g", a, None, 1) is Errors.ILLEGAL_GENERATION
        assert coord.heartbeat("g", "nobody", None, 2) is Errors.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("", a, None, 2) is Errors.INVALID_GROUP_ID
        assert coord.heartbeat("unknown-group", a, None, 2) is Errors.UNKNOWN_MEMBER_ID
    _run(test)


def test_join_validation_errors() -> None:
    async def test(coord: GroupCoordinator) -> None:
        assert (await _join(coord, session_ms=5)).error is Errors.INVALID_SESSION_TIMEOUT
        assert (await _join(coord, member_id="ghost")).error is Errors.UNKNOWN_MEMBER_ID
        await (await _member_joins(coord))
        assert (await _join(coord, protocol_type="connect")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
        assert (await _join(coord, protocols=[("roundrobin", b"")])).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    _run(test)


def test_group_max_size() -> None:
    async def test(coord: GroupCoordinator) -> None:
        await (await _member_joins(coord))
        assert (await _join(coord)).error is Errors.GROUP_MAX_SIZE_REACHED
    _run(test, max_size=1)


def test_a_member_that_stops_heartbeating_is_removed() -> None:
    async def test(coord: GroupCoordinator) -> None:
        a = await (await _member_joins(coord, session_ms=50))
        await coord.sync_group("g", 1, a.member_id, None, None, None, {})
        group = coord.manager.get_group("g")
        assert group is not None
        await wait_until(lambda: not group.members)
        await wait_until(lambda: group.state is GroupState.EMPTY)
        assert group.generation_id == 2
    _run(test)


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    async def test(coord: GroupCoordinator) -> None:
        first = await (await _member_joins(coord))
        s = _join(coord, instance="static-1")  # static members skip MEMBER_ID_REQUIRED
        assert coord.heartbeat("g", first.member_id, None, 1) is Errors.REBALANCE_IN_PROGRESS
        await _join(coord, member_id=first.member_id)
        s2 = await s
        await coord.sync_group("g", 2, first.member_id, None, None, None,
                               {first.member_id: b"A", s2.member_id: b"S"})
        assert (await coord.sync_group("g", 2, s2.member_id, None, None, None, {})).assignment == b"S"

        again = await _join(coord, instance="static-1")  # restarted: unknown member id, same instance id
        assert again.error is Errors.NONE and again.member_id != s2.member_id and again.generation_id == 2
        group = coord.manager.get_group("g")
        assert group is not None and group.state is GroupState.STABLE and group.generation_id == 2
        synced = await coord.sync_group("g", 2, again.member_id, None, None, "static-1", {})
        assert synced.assignment == b"S"
        assert coord.heartbeat("g", s2.member_id, "static-1", 2) is Errors.FENCED_INSTANCE_ID
        assert coord.heartbeat("g", first.member_id, None, 2) is Errors.NONE
    _run(test)


def test_commits_check_generation_and_membership() -> None:
    async def test(coord: GroupCoordinator) -> None:
        offsets = {("t", 0): OffsetAndMetadata(10, -1, "", 1)}
        assert await commit_offsets(coord, "simple", "", None, -1, offsets) == {("t", 0): Errors.NONE}
        assert fetch_offsets(coord, "simple", False, [("t", 0), ("t", 1)]) == (
            Errors.NONE, {("t", 0): (10, -1, "", Errors.NONE), ("t", 1): (-1, -1, "", Errors.NONE)})
        assert await commit_offsets(coord, "gone", "m", None, 3, offsets) == {("t", 0): Errors.ILLEGAL_GENERATION}
        a, _b = await _two_member_stable_group(coord)
        assert await commit_offsets(coord, "g", a, None, 1, offsets) == {("t", 0): Errors.ILLEGAL_GENERATION}
        assert await commit_offsets(coord, "g", "x", None, 2, offsets) == {("t", 0): Errors.UNKNOWN_MEMBER_ID}
        assert await commit_offsets(coord, "g", "", None, -1, offsets) == {("t", 0): Errors.UNKNOWN_MEMBER_ID}
        assert await commit_offsets(coord, "g", a, None, 2, offsets) == {("t", 0): Errors.NONE}
        error, summary = describe_group(coord, "g")
        assert error is Errors.NONE and summary.state == "Stable" and len(summary.members) == 2
        assert delete_groups(coord, ["g", "simple", "nope"]) == {
            "g": Errors.NON_EMPTY_GROUP, "simple": Errors.NONE, "nope": Errors.GROUP_ID_NOT_FOUND}
        assert fetch_offsets(coord, "simple", False, None) == (Errors.NONE, {})
    _run(test)


def test_leave_group_by_member_and_by_instance_id() -> None:
    async def test(coord: GroupCoordinator) -> None:
        a, b = await _two_member_stable_group(coord)
        assert coord.leave_group("g", [(b, None), ("ghost", None), ("", "no-such-instance")]) == (
            Errors.NONE, [Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID])
        group = coord.manager.get_group("g")
        assert group is not None and group.state is GroupState.PREPARING_REBALANCE
        rejoined = await _join(coord, member_id=a)
        assert rejoined.generation_id == 3 and rejoined.members and len(rejoined.members) == 1
    _run(test)


class _Records:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read_bytes(self) -> bytes:
        return self.data


class _FakeLog:
    """Just enough of storage.log.Log for read_partition_log: everything in one read."""

    def __init__(self, batches: list[bytes]) -> None:
        self.data = b"".join(batches)
        self.log_start_offset = 0
        self.log_end_offset = 1

    def read(self, offset: int, max_bytes: int, min_one_message: bool = True, max_offset: int | None = None) -> Any:
        return type("Info", (), {"records": _Records(self.data if offset == 0 else b"")})()


def test_becoming_leader_loads_groups_and_losing_it_unloads_them() -> None:
    async def main() -> None:
        writer, replicas = coordinator()
        assert await commit_offsets(writer, "g", "", None, -1, {("t", 0): OffsetAndMetadata(9, -1, "m", 1)}) == {
            ("t", 0): Errors.NONE}
        writer.shutdown()

        coord, fake = coordinator()
        coord.manager.owned_partitions.clear()
        gate = asyncio.Event()
        tp_log = _FakeLog(replicas.batches)
        fake.get_partition = lambda topic, partition: type("P", (), {"log": tp_log})()  # type: ignore[method-assign]

        async def slow_read(fn: Any, *args: Any) -> Any:
            await gate.wait()
            return fn(*args)

        coord.manager.run_blocking = slow_read
        try:
            coord.on_leadership_change("__consumer_offsets", 0, True, 3)
            await asyncio.sleep(0)
            assert fetch_offsets(coord, "g", False, [("t", 0)])[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
            assert (await _join(coord)).error is Errors.COORDINATOR_LOAD_IN_PROGRESS
            gate.set()
            await wait_until(lambda: coord.manager.is_partition_owned(0))
            assert fetch_offsets(coord, "g", False, [("t", 0)]) == (Errors.NONE, {("t", 0): (9, -1, "m", Errors.NONE)})

            joining = await _member_joins(coord, group="other")
            assert (await joining).error is Errors.NONE
            pending_sync = coord.sync_group("other", 99, "nobody", None, None, None, {})
            assert (await pending_sync).error is Errors.UNKNOWN_MEMBER_ID
            coord.on_leadership_change("__consumer_offsets", 0, False, 4)
            assert coord.manager.get_group("g") is None and coord.manager.get_group("other") is None
            assert fetch_offsets(coord, "g", False, [("t", 0)])[0] is Errors.NOT_COORDINATOR
            assert coord.heartbeat("other", "x", None, 1) is Errors.NOT_COORDINATOR
        finally:
            coord.shutdown()

    asyncio.run(main())


def test_unloading_answers_waiting_joins_with_not_coordinator() -> None:
    async def test(coord: GroupCoordinator) -> None:
        first = await (await _member_joins(coord))
        await coord.sync_group("g", 1, first.member_id, None, None, None, {})
        second = await _member_joins(coord)  # waits for the first member to rejoin
        assert not second.done()
        coord.on_leadership_change("__consumer_offsets", 0, False, 1)
        assert (await second).error is Errors.NOT_COORDINATOR
    _run(test)


def test_offsets_of_an_empty_group_expire_and_the_group_dies() -> None:
    async def test(coord: GroupCoordinator) -> None:
        offsets = {("t", 0): OffsetAndMetadata(1, -1, "", 0)}
        assert await commit_offsets(coord, "old", "", None, -1, offsets) == {("t", 0): Errors.NONE}
        await wait_until(lambda: coord.manager.get_group("old") is None)
        assert fetch_offsets(coord, "old", False, [("t", 0)]) == (Errors.NONE, {("t", 0): (-1, -1, "", Errors.NONE)})
    _run(test, offsets_retention_ms=50, offsets_retention_check_interval_ms=20)
