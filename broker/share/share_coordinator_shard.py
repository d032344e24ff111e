"""ShareCoordinatorShard: the share-group state of the share-partitions one ``__share_group_state``
partition holds, rebuilt from its records and changed by the state RPCs (pure logic).

As Kafka's ShareCoordinatorShard: a share-partition's state (state epoch, leader epoch, start
offset, state batches) is written as a ShareSnapshot record when first initialized and after
``share.coordinator.snapshot.update.records.per.snapshot`` updates, and as ShareUpdate records in
between, whose batches are merged into the snapshot on replay. A write from an older state epoch
is FENCED_STATE_EPOCH, from an older leader epoch FENCED_LEADER_EPOCH; both change nothing.
Deleting a share-partition's state writes tombstones for both its keys, so compaction drops it.
Every record before the oldest of the share-partitions' latest snapshots is redundant: the log is
pruned up to there (Kafka's lastRedundantOffset).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from protocol import share_group_state_records as records
from protocol.errors import Errors
from protocol.share_group_state_records import PersistedBatch, ShareStateKey

StateKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
Record = tuple[bytes, bytes | None]  # (key, value or None for a tombstone)


@dataclass(frozen=True)
class ShareGroupOffset:
    """Kafka's ShareGroupOffset: one share-partition's persisted state."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[PersistedBatch] = field(default_factory=list)
    create_timestamp: int = -1
    write_timestamp: int = -1


def merge_batches(current: list[PersistedBatch], updates: list[PersistedBatch], start_offset: int
                  ) -> list[PersistedBatch]:
    """``current`` with the offsets ``updates`` cover replaced by them, nothing below
    ``start_offset``, in offset order."""
    out: list[PersistedBatch] = []
    covered = sorted((b.first_offset, b.last_offset) for b in updates)
    for batch in current:
        pieces = [(batch.first_offset, batch.last_offset)]
        for lo, hi in covered:
            pieces = [p for first, last in pieces for p in _minus(first, last, lo, hi)]
        out += [replace(batch, first_offset=first, last_offset=last) for first, last in pieces]
    out += updates
    trimmed = [replace(b, first_offset=max(b.first_offset, start_offset)) for b in out if b.last_offset >= start_offset]
    return sorted(trimmed, key=lambda b: b.first_offset)


def _minus(first: int, last: int, lo: int, hi: int) -> list[tuple[int, int]]:
    if hi < first or lo > last:
        return [(first, last)]
    return [r for r in ((first, lo - 1), (hi + 1, last)) if r[0] <= r[1]]


class ShareCoordinatorShard:
    def __init__(self, snapshot_every: int = 500) -> None:
        self.snapshot_every = snapshot_every
        self.state: dict[StateKey, ShareGroupOffset] = {}
        self.updates_since_snapshot: dict[StateKey, int] = {}
        self.snapshot_offsets: dict[StateKey, int] = {}  # where each share-partition's latest snapshot is
        self.end_offset = 0  # past the last record replayed

    def redundant_offset(self) -> int:
        """The offset before which no record is needed to rebuild the state."""
        return min(self.snapshot_offsets.values(), default=self.end_offset)

    # --- replay --------------------------------------------------------------------------------

    def replay(self, key_bytes: bytes, value_bytes: bytes | None, offset: int) -> None:
        self.end_offset = max(self.end_offset, offset + 1)
        key = records.decode_key(key_bytes)
        state_key = (key.group_id, key.topic_id, key.partition)
        if value_bytes is None:
            if key.record_type == records.SNAPSHOT_RECORD_TYPE:
                self.state.pop(state_key, None)
                self.updates_since_snapshot.pop(state_key, None)
                self.snapshot_offsets.pop(state_key, None)
            return
        if key.record_type == records.SNAPSHOT_RECORD_TYPE:
            self.snapshot_offsets[state_key] = offset
            value = records.decode_snapshot_value(value_bytes)
            self.state[state_key] = ShareGroupOffset(value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                                                     value.start_offset, value.state_batches,
                                                     value.create_timestamp, value.write_timestamp)
            self.updates_since_snapshot[state_key] = 0
            return
        update = records.decode_update_value(value_bytes)
        current = self.state.get(state_key)
        if current is None or update.snapshot_epoch != current.snapshot_epoch:
            return  # an update of a snapshot compaction or a newer snapshot superseded
        start = update.start_offset if update.start_offset >= 0 else current.start_offset
        self.state[state_key] = replace(current, leader_epoch=update.leader_epoch, start_offset=start,
                                        state_batches=merge_batches(current.state_batches, update.state_batches, start))
        self.updates_since_snapshot[state_key] = self.updates_since_snapshot.get(state_key, 0) + 1

    # --- the state RPCs: each returns its error and the records to append ---------------------------

    def write(self, state_key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: list[PersistedBatch], now_ms: int) -> tuple[Errors, list[Record]]:
        current = self.state.get(state_key)
        if current is not None:
            if state_epoch < current.state_epoch:
                return Errors.FENCED_STATE_EPOCH, []
            if leader_epoch < current.leader_epoch:
                return Errors.FENCED_LEADER_EPOCH, []
        if current is None or state_epoch > current.state_epoch \
                or self.updates_since_snapshot.get(state_key, 0) >= self.snapshot_every:
            base = current.state_batches if current is not None and state_epoch == current.state_epoch else []
            start = start_offset if start_offset >= 0 else (current.start_offset if current else 0)
            snapshot_epoch = current.snapshot_epoch + 1 if current is not None else 0
            created = current.create_timestamp if current is not None else now_ms
            return Errors.NONE, [self._snapshot(state_key, ShareGroupOffset(
                snapshot_epoch, state_epoch, leader_epoch, start, merge_batches(base, batches, start),
                created, now_ms))]
        key = records.encode_key(ShareStateKey(records.UPDATE_RECORD_TYPE, *state_key))
        return Errors.NONE, [(key, records.encode_update_value(records.ShareUpdateValue(
            current.snapshot_epoch, leader_epoch, start_offset, batches)))]

    def initialize(self, state_key: StateKey, state_epoch: int, start_offset: int,
                   now_ms: int) -> tuple[Errors, list[Record]]:
        current = self.state.get(state_key)
        if current is not None and state_epoch < current.state_epoch:
            return Errors.FENCED_STATE_EPOCH, []
        snapshot_epoch = current.snapshot_epoch + 1 if current is not None else 0
        return Errors.NONE, [self._snapshot(state_key, ShareGroupOffset(
            snapshot_epoch, state_epoch, -1, start_offset, [], now_ms, now_ms))]

    def delete(self, state_key: StateKey) -> tuple[Errors, list[Record]]:
        if state_key not in self.state:
            return Errors.NONE, []
        return Errors.NONE, [(records.encode_key(ShareStateKey(t, *state_key)), None)
                             for t in (records.UPDATE_RECORD_TYPE, records.SNAPSHOT_RECORD_TYPE)]

    def read(self, state_key: StateKey) -> ShareGroupOffset | None:
        return self.state.get(state_key)

    @staticmethod
    def _snapshot(state_key: StateKey, offset: ShareGroupOffset) -> Record:
        key = records.encode_key(ShareStateKey(records.SNAPSHOT_RECORD_TYPE, *state_key))
        return key, records.encode_snapshot_value(records.ShareSnapshotValue(
            offset.snapshot_epoch, offset.state_epoch, offset.leader_epoch, offset.start_offset,
            offset.create_timestamp, offset.write_timestamp, offset.state_batches))
