"""Records the manager writes decode with Kafka's schemas and rebuild the same state on load."""
from __future__ import annotations

import asyncio

import pytest

from broker.coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from broker.coordinator.group.group_metadata_manager import LoadedPartition, group_store_error, offset_store_error
from protocol import consumer_offsets_records as records
from protocol.errors import Errors
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from tests.unit.group.group_fakes import coordinator


def _stable_group() -> GroupMetadata:
    group = GroupMetadata("g1")
    member = MemberMetadata("m-1", "static-1", "client", "/10.0.0.1", 60000, 10000, "consumer",
                            [("range", b"subscription")])
    member.assignment = b"assignment"
    group.add(member)
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    group.transition_to(GroupState.STABLE)
    return group


def _records(batches: list[bytes]) -> list[tuple[bytes, bytes | None]]:
    return [(bytes(r.key), None if r.value is None else bytes(r.value))
            for batch in batches for pos, _ in iter_log_entries(batch) for r in decode_entry_records(batch, pos)]


def test_commits_and_group_metadata_round_trip_through_kafkas_schemas() -> None:
    async def run() -> None:
        coord, replicas = coordinator()
        manager = coord.manager
        group = manager.add_group(_stable_group())
        offsets = {("t", 0): OffsetAndMetadata(42, 3, "meta", 1_700_000_000_000),
                   ("t", 1): OffsetAndMetadata(7, -1, "", 1_700_000_000_001, expire_timestamp=1_800_000_000_000)}
        assert await manager.store_offsets(group, offsets) == {("t", 0): Errors.NONE, ("t", 1): Errors.NONE}
        assert await manager.store_group(group, {"m-1": b"assignment"}) is Errors.NONE
        assert group.offsets == offsets and not group.pending_offset_commits

        written = _records(replicas.batches)
        keys = [records.decode_key(k) for k, _ in written]
        assert keys == [records.OffsetCommitKey("g1", "t", 0), records.OffsetCommitKey("g1", "t", 1),
                        records.GroupMetadataKey("g1")]
        first = records.decode_offset_commit_value(written[0][1])  # type: ignore[arg-type]
        assert (first.version, first.offset, first.leader_epoch, first.metadata) == (3, 42, 3, "meta")
        assert records.decode_offset_commit_value(written[1][1]).version == 1  # type: ignore[arg-type]
        value = records.decode_group_metadata_value(written[2][1])  # type: ignore[arg-type]
        assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", 1, "range", "m-1")
        assert value.members[0].group_instance_id == "static-1"
        assert value.members[0].assignment == b"assignment"

        loaded = LoadedPartition()
        for batch in replicas.batches:
            loaded.apply(batch)
        (rebuilt,) = loaded.build_groups()
        assert rebuilt.state is GroupState.STABLE and rebuilt.generation_id == 1
        assert rebuilt.offsets == offsets
        assert rebuilt.static_members == {"static-1": "m-1"}
        assert rebuilt.get("m-1").assignment == b"assignment"
        coord.shutdown()

    asyncio.run(run())


def test_tombstones_delete_offsets_and_groups_on_load() -> None:
    async def run() -> None:
        coord, replicas = coordinator()
        manager = coord.manager
        group = manager.add_group(GroupMetadata("g2"))
        await manager.store_offsets(group, {("t", 0): OffsetAndMetadata(1, -1, "", 1),
                                            ("t", 1): OffsetAndMetadata(2, -1, "", 1)})
        await asyncio.gather(*manager.cleanup_group_metadata([group], lambda g: g.remove_offsets([("t", 0)])))
        loaded = LoadedPartition()
        for batch in replicas.batches:
            loaded.apply(batch)
        (rebuilt,) = loaded.build_groups()
        assert set(rebuilt.offsets) == {("t", 1)}

        await asyncio.gather(*manager.cleanup_group_metadata([group], lambda g: g.remove_offsets([("t", 1)])))
        assert manager.get_group("g2") is None and group.state is GroupState.DEAD
        loaded = LoadedPartition()
        for batch in replicas.batches:
            loaded.apply(batch)
        assert loaded.build_groups() == []
        coord.shutdown()

    asyncio.run(run())


def test_oversized_metadata_is_refused_per_partition() -> None:
    async def run() -> None:
        coord, replicas = coordinator(max_metadata_size=4)
        group = coord.manager.add_group(GroupMetadata("g3"))
        result = await coord.manager.store_offsets(group, {("t", 0): OffsetAndMetadata(1, -1, "12345", 1),
                                                           ("t", 1): OffsetAndMetadata(1, -1, "1234", 1)})
        assert result == {("t", 0): Errors.OFFSET_METADATA_TOO_LARGE, ("t", 1): Errors.NONE}
        assert set(group.offsets) == {("t", 1)}
        coord.shutdown()

    asyncio.run(run())


@pytest.mark.parametrize("append_error, offsets_error", [
    (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
    (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
    (Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_COMMIT_OFFSET_SIZE),
    (Errors.REQUEST_TIMED_OUT, Errors.REQUEST_TIMED_OUT),
])
def test_failed_commit_appends_map_to_offset_commit_errors(append_error: Errors, offsets_error: Errors) -> None:
    async def run() -> None:
        coord, replicas = coordinator()
        replicas.fail_with = append_error
        group = coord.manager.add_group(GroupMetadata("g4"))
        result = await coord.manager.store_offsets(group, {("t", 0): OffsetAndMetadata(1, -1, "", 1)})
        assert result == {("t", 0): offsets_error}
        assert not group.offsets and not group.pending_offset_commits
        coord.shutdown()

    asyncio.run(run())


def test_group_metadata_append_errors_map_as_kafka_does() -> None:
    assert group_store_error(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND) is Errors.COORDINATOR_NOT_AVAILABLE
    assert group_store_error(Errors.KAFKA_STORAGE_ERROR) is Errors.NOT_COORDINATOR
    assert group_store_error(Errors.REQUEST_TIMED_OUT) is Errors.REBALANCE_IN_PROGRESS
    assert group_store_error(Errors.MESSAGE_TOO_LARGE) is Errors.UNKNOWN_SERVER_ERROR
    assert offset_store_error(Errors.UNKNOWN_TOPIC_OR_PARTITION) is Errors.COORDINATOR_NOT_AVAILABLE
    assert offset_store_error(Errors.INVALID_FETCH_SIZE) is Errors.INVALID_COMMIT_OFFSET_SIZE


def test_transactional_offsets_wait_for_their_marker_live_and_on_load() -> None:
    """Kafka's rules: a COMMIT marker applies a producer's pending offsets unless a newer commit record
    exists for the partition, ABORT drops them, and a replay of the log ends in the same state."""
    from broker.coordinator.group.group_operations import fetch_offsets
    from protocol.records.batch import read_batch_header, set_base_offset
    from protocol.records.builder import build_control_batch
    from protocol.records.control import ControlRecordType, EndTransactionMarker

    tp = ("t", 0)

    def at(offset: int) -> OffsetAndMetadata:
        return OffsetAndMetadata(offset, -1, "", 1_700_000_000_000)

    async def run() -> None:
        coord, replicas = coordinator()
        manager = coord.manager
        group = manager.add_group(GroupMetadata("g1"))
        assert await manager.store_offsets(group, {tp: at(10)}, producer_id=5, producer_epoch=2) == {tp: Errors.NONE}
        header = read_batch_header(replicas.batches[0])
        assert (header.producer_id, header.producer_epoch, header.base_sequence, header.is_transactional) == \
            (5, 2, 0, True)
        assert tp not in group.offsets and group.has_pending_offset_commits(tp)
        assert fetch_offsets(coord, "g1", True, [tp])[1][tp][3] is Errors.UNSTABLE_OFFSET_COMMIT
        manager.handle_txn_completion(5, [0], True)
        assert group.offsets[tp].offset == 10 and not group.has_pending_offset_commits(tp)

        await manager.store_offsets(group, {tp: at(20)}, producer_id=6, producer_epoch=0)
        await manager.store_offsets(group, {tp: at(30)})  # a plain commit written after it
        manager.handle_txn_completion(6, [0], True)
        assert group.offsets[tp].offset == 30  # the transactional record is older: it does not win
        await manager.store_offsets(group, {tp: at(40)}, producer_id=7, producer_epoch=0)
        manager.handle_txn_completion(7, [0], False)
        assert group.offsets[tp].offset == 30
        await manager.store_offsets(group, {tp: at(50)}, producer_id=8, producer_epoch=0)
        assert manager.open_groups_of_producer == {8: {"g1"}}

        def marker(pid: int, commit: bool) -> bytes:
            kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
            return bytes(build_control_batch(EndTransactionMarker(kind, 0), producer_id=pid, producer_epoch=0,
                                             timestamp=0))

        txn10, txn20, plain30, txn40, txn50 = (bytearray(b) for b in replicas.batches)
        log = [txn10, marker(5, True), txn20, plain30, marker(6, True), txn40, marker(7, False), txn50]
        loaded = LoadedPartition()
        for offset, batch in enumerate(log):
            batch = bytearray(batch)
            set_base_offset(batch, 0, offset)
            loaded.apply(bytes(batch))
        (rebuilt,) = loaded.build_groups()
        assert rebuilt.offsets[tp].offset == 30
        assert {pid: {p: e.offset.offset for p, e in offsets.items()}
                for pid, offsets in rebuilt.pending_txn_offset_commits.items()} == {8: {tp: 50}}

    asyncio.run(run())
