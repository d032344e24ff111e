"""ShareCoordinatorShard: snapshots, updates merged on replay, fencing and deletion."""

from __future__ import annotations

import uuid

from broker.share.share_coordinator_shard import ShareCoordinatorShard, merge_batches
from protocol.errors import Errors
from protocol.share_group_state_records import PersistedBatch as B

KEY = ("g", uuid.uuid4(), 0)


def _apply(shard: ShareCoordinatorShard, result) -> Errors:  # type: ignore[no-untyped-def]
    error, entries = result
    for key, value in entries:
        shard.replay(key, value, shard.end_offset)
    return error


def test_merge_replaces_covered_offsets_and_drops_what_is_below_the_start():
    current = [B(0, 9, 0, 1)]
    assert merge_batches(current, [B(3, 4, 2, 1)], 2) == [B(2, 2, 0, 1), B(3, 4, 2, 1), B(5, 9, 0, 1)]


def test_updates_between_snapshots_and_replay_from_the_log():
    shard = ShareCoordinatorShard(snapshot_every=2)
    written = []
    for batches, start in ([B(0, 4, 0, 1)], 0), ([B(0, 1, 2, 1)], 2), ([B(2, 2, 4, 3)], 3), ([B(3, 4, 0, 2)], 3):
        error, entries = shard.write(KEY, 0, 5, start, batches, now_ms=1)
        assert error is Errors.NONE
        written += entries
        for key, value in entries:
            shard.replay(key, value, len(written) - 1)
    types = [key[1] for key, _value in written]
    assert types == [0, 1, 1, 0]  # a snapshot, two updates, a snapshot again
    assert shard.redundant_offset() == 3  # all before the last snapshot can go
    replayed = ShareCoordinatorShard()
    for offset, (key, value) in enumerate(written):
        if offset >= shard.redundant_offset():  # the pruned log rebuilds the same state
            replayed.replay(key, value, offset)
    state = replayed.read(KEY)
    assert state == shard.read(KEY)
    assert state.start_offset == 3 and state.state_batches == [B(3, 4, 0, 2)]


def test_older_state_or_leader_epochs_are_fenced():
    shard = ShareCoordinatorShard()
    assert _apply(shard, shard.initialize(KEY, 1, 10, now_ms=0)) is Errors.NONE
    assert _apply(shard, shard.write(KEY, 1, 4, 10, [], now_ms=0)) is Errors.NONE
    assert shard.write(KEY, 0, 4, 10, [], now_ms=0)[0] is Errors.FENCED_STATE_EPOCH
    assert shard.write(KEY, 1, 3, 10, [], now_ms=0)[0] is Errors.FENCED_LEADER_EPOCH
    assert shard.read(KEY).leader_epoch == 4


def test_delete_writes_tombstones():
    shard = ShareCoordinatorShard()
    _apply(shard, shard.initialize(KEY, 0, 0, now_ms=0))
    error, entries = shard.delete(KEY)
    assert error is Errors.NONE and [value for _key, value in entries] == [None, None]
    for key, value in entries:
        shard.replay(key, value, shard.end_offset)
    assert shard.read(KEY) is None and shard.redundant_offset() == shard.end_offset
