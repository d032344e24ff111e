"""SharePartition: the in-flight records of one topic partition for one share group (KIP-932).

As Kafka's ``SharePartition``: records between the share-partition start offset and the end of
what has been handed out (``next_offset``, exclusive) are in flight, each in one of the states
AVAILABLE, ACQUIRED, ACKNOWLEDGED or ARCHIVED with a delivery count. A fetch acquires
available records for one member under a lock of ``group.share.record.lock.duration.ms``; the
member accepts, releases or rejects them; a lock that runs out, a release or a member that
leaves makes them available again, until the delivery count reaches
``group.share.delivery.count.limit`` and they are archived. The start offset moves past every
leading record that is acknowledged or archived, and the in-flight window never grows beyond
``group.share.partition.max.record.locks`` records.

Records are tracked per batch: a batch fetched whole stays one entry with one state, and is
split into per-offset states only when a part of it changes state on its own (Kafka's
``InFlightBatch`` with its ``offsetState`` map). Pure logic: time comes in as ``now_ms``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from protocol.errors import Errors


class RecordState(IntEnum):
    """A record's delivery state; the values are the ones written to ``__share_group_state``."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


# Kafka's RecordState.validateTransition: ACKNOWLEDGED and ARCHIVED are final.
_TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED, RecordState.ARCHIVED}),
    RecordState.ACQUIRED: frozenset({RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED}),
    RecordState.ACKNOWLEDGED: frozenset(),
    RecordState.ARCHIVED: frozenset(),
}


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class InvalidRecordState(Exception):
    """A record is not in a state that allows the requested change (INVALID_RECORD_STATE)."""


@dataclass(slots=True)
class InFlightState:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None

    def transition(self, new: RecordState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise InvalidRecordState(f"{self.state.name} cannot become {new.name}")
        self.state = new
        if new is not RecordState.ACQUIRED:
            self.member_id = None
            self.lock_deadline_ms = None


@dataclass(slots=True)
class InFlightBatch:
    """Offsets ``first``..``last`` with one shared state, or one state per offset once split."""

    first: int
    last: int
    batch: InFlightState | None
    offsets: list[InFlightState] | None = None

    def split(self) -> list[InFlightState]:
        if self.offsets is None:
            assert self.batch is not None
            self.offsets = [replace(self.batch) for _ in range(self.last - self.first + 1)]
            self.batch = None
        return self.offsets

    def states(self, lo: int, hi: int) -> Iterator[tuple[int, int, InFlightState]]:
        """(first, last, state) runs covering ``lo``..``hi`` within this batch."""
        lo, hi = max(lo, self.first), min(hi, self.last)
        if self.batch is not None:
            if lo <= hi:
                yield lo, hi, self.batch
            return
        assert self.offsets is not None
        for offset in range(lo, hi + 1):
            yield offset, offset, self.offsets[offset - self.first]


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A log batch as read for a share fetch; ``skip`` for aborted transactional data and
    control batches, which are archived instead of delivered (read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted run of offsets (WriteShareGroupState's StateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


class SharePartition:
    def __init__(self, start_offset: int, config: SharePartitionConfig,
                 state_batches: Iterable[StateBatch] = (), state_epoch: int = 0) -> None:
        self.config = config
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.state_epoch = state_epoch
        self._batches: list[InFlightBatch] = []
        self._firsts: list[int] = []
        for persisted in state_batches:
            if persisted.last_offset < start_offset:
                continue
            first = max(persisted.first_offset, start_offset)
            if first > self.next_offset:
                self._append(self.next_offset, first - 1, InFlightState(RecordState.ARCHIVED, 0))
            self._append(first, persisted.last_offset,
                         InFlightState(persisted.delivery_state, persisted.delivery_count))
        self._advance_start()

    # --- what a fetch reads --------------------------------------------------------------------

    def fetch_offset(self) -> int:
        """Where the next share fetch reads the log: the first available record, else the end."""
        for batch in self._batches:
            for first, _last, state in batch.states(batch.first, batch.last):
                if state.state is RecordState.AVAILABLE:
                    return first
        return self.next_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: an available record, or room for new ones."""
        return self.fetch_offset() < self.next_offset or self._room() > 0

    def _room(self) -> int:
        return self.config.max_record_locks - (self.next_offset - self.start_offset)

    # --- acquisition ---------------------------------------------------------------------------

    def acquire(self, member_id: str, fetched: Sequence[FetchedBatch], max_records: int,
                now_ms: int) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the available and new records among the fetched batches.

        New records are acquired a whole log batch at a time (so ``max_records`` may be exceeded
        to keep batch boundaries, as Kafka does); available in-flight records up to the limit.
        """
        acquired: list[AcquiredRecords] = []
        count = 0
        deadline = now_ms + self.config.record_lock_duration_ms
        for fetched_batch in fetched:
            if count >= max_records:
                break
            lo = max(fetched_batch.base_offset, self.start_offset)
            if fetched_batch.last_offset < lo:
                continue
            if lo < self.next_offset:
                count += self._acquire_available(member_id, lo, min(fetched_batch.last_offset, self.next_offset - 1),
                                                 max_records - count, deadline, acquired)
            if fetched_batch.last_offset < self.next_offset or count >= max_records:
                continue
            if self._room() <= 0:
                break
            first = max(fetched_batch.base_offset, self.next_offset)
            if first > self.next_offset:  # offsets the log no longer has (compaction, deleted records)
                self._append(self.next_offset, first - 1, InFlightState(RecordState.ARCHIVED, 0))
            if fetched_batch.skip:
                self._append(first, fetched_batch.last_offset, InFlightState(RecordState.ARCHIVED, 0))
                continue
            self._append(first, fetched_batch.last_offset,
                         InFlightState(RecordState.ACQUIRED, 1, member_id, deadline))
            acquired.append(AcquiredRecords(first, fetched_batch.last_offset, 1))
            count += fetched_batch.last_offset - first + 1
        self._advance_start()
        return _merged(acquired)

    def _acquire_available(self, member_id: str, lo: int, hi: int, limit: int, deadline: int,
                           acquired: list[AcquiredRecords]) -> int:
        count = 0
        for batch in self._overlapping(lo, hi):
            if count >= limit:
                break
            whole = batch.batch is not None and lo <= batch.first and batch.last <= hi
            if whole and batch.batch.state is RecordState.AVAILABLE:  # type: ignore[union-attr]
                self._acquire_state(batch.batch, member_id, deadline)  # type: ignore[arg-type]
                acquired.append(AcquiredRecords(batch.first, batch.last, batch.batch.delivery_count))  # type: ignore[union-attr]
                count += batch.last - batch.first + 1
                continue
            if batch.batch is not None and batch.batch.state is not RecordState.AVAILABLE:
                continue
            for offset, _last, state in list(_per_offset(batch, lo, hi)):
                if count >= limit:
                    break
                if state.state is RecordState.AVAILABLE:
                    self._acquire_state(state, member_id, deadline)
                    acquired.append(AcquiredRecords(offset, offset, state.delivery_count))
                    count += 1
        return count

    def _acquire_state(self, state: InFlightState, member_id: str, deadline: int) -> None:
        state.transition(RecordState.ACQUIRED)
        state.delivery_count += 1
        state.member_id = member_id
        state.lock_deadline_ms = deadline

    # --- acknowledgement -----------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]],
                    now_ms: int) -> Errors:
        """Apply ``(first, last, types)`` acknowledgements; all or nothing.

        ``types`` holds one type for the whole range or one per offset. A malformed batch is
        INVALID_REQUEST; a record not acquired by this member INVALID_RECORD_STATE.
        """
        for first, last, types in batches:
            if first > last or first < 0 or not types or len(types) not in (1, last - first + 1):
                return Errors.INVALID_REQUEST
            if any(t not in AcknowledgeType._value2member_map_ for t in types):
                return Errors.INVALID_REQUEST
        for first, last, _types in batches:
            if first < self.start_offset or last >= self.next_offset:
                return Errors.INVALID_RECORD_STATE
            for batch in self._overlapping(first, last):
                for _lo, _hi, state in batch.states(first, last):
                    if state.state is not RecordState.ACQUIRED or state.member_id != member_id:
                        return Errors.INVALID_RECORD_STATE
        for first, last, types in batches:
            if len(types) == 1:
                self._apply(first, last, AcknowledgeType(types[0]), now_ms)
            else:
                for offset, ack in enumerate(types, first):
                    self._apply(offset, offset, AcknowledgeType(ack), now_ms)
        self._advance_start()
        return Errors.NONE

    def _apply(self, first: int, last: int, ack: AcknowledgeType, now_ms: int) -> None:
        for batch in self._overlapping(first, last):
            states = [batch.batch] if batch.batch is not None and first <= batch.first and batch.last <= last \
                else [state for _lo, _hi, state in _per_offset(batch, first, last)]
            for state in states:
                assert state is not None
                if ack is AcknowledgeType.RENEW:
                    state.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
                elif ack is AcknowledgeType.ACCEPT:
                    state.transition(RecordState.ACKNOWLEDGED)
                elif ack is AcknowledgeType.RELEASE:
                    self._release(state)
                else:  # GAP and REJECT
                    state.transition(RecordState.ARCHIVED)

    def _release(self, state: InFlightState) -> None:
        """Back to AVAILABLE, or ARCHIVED once the delivery count has reached its limit."""
        limit_reached = state.delivery_count >= self.config.delivery_count_limit
        state.transition(RecordState.ARCHIVED if limit_reached else RecordState.AVAILABLE)

    # --- locks and members ---------------------------------------------------------------------

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (it left or its session closed); the count."""
        return self._release_where(lambda state: state.member_id == member_id)

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose acquisition lock ran out; the count."""
        return self._release_where(lambda state: state.lock_deadline_ms is not None
                                   and state.lock_deadline_ms <= now_ms)

    def _release_where(self, held) -> int:  # type: ignore[no-untyped-def]
        released = 0
        for batch in self._batches:
            for first, last, state in batch.states(batch.first, batch.last):
                if state.state is RecordState.ACQUIRED and held(state):
                    self._release(state)
                    released += last - first + 1
        if released:
            self._advance_start()
        return released

    # --- state as persisted --------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as written to ``__share_group_state``: an acquired record is
        written as available with its delivery count, so a restart redelivers it and the count
        survives."""
        out: list[StateBatch] = []
        for batch in self._batches:
            for first, last, state in batch.states(batch.first, batch.last):
                persisted = RecordState.AVAILABLE if state.state is RecordState.ACQUIRED else state.state
                previous = out[-1] if out else None
                if previous is not None and previous.last_offset + 1 == first \
                        and previous.delivery_state is persisted and previous.delivery_count == state.delivery_count:
                    out[-1] = replace(previous, last_offset=last)
                else:
                    out.append(StateBatch(first, last, persisted, state.delivery_count))
        return out

    def record_state(self, offset: int) -> InFlightState | None:
        """The state of one in-flight offset (None outside the window); for tests and describe."""
        for batch in self._overlapping(offset, offset):
            for _f, _l, state in batch.states(offset, offset):
                return state
        return None

    # --- the batch list ------------------------------------------------------------------------

    def _append(self, first: int, last: int, state: InFlightState) -> None:
        self._batches.append(InFlightBatch(first, last, state))
        self._firsts.append(first)
        self.next_offset = last + 1

    def _overlapping(self, lo: int, hi: int) -> list[InFlightBatch]:
        index = max(bisect.bisect_right(self._firsts, lo) - 1, 0)
        out = []
        for batch in self._batches[index:]:
            if batch.first > hi:
                break
            if batch.last >= lo:
                out.append(batch)
        return out

    def _advance_start(self) -> None:
        """Move the start offset past the leading acknowledged and archived records."""
        drop = 0
        for batch in self._batches:
            if batch.batch is not None:
                if not batch.batch.state.terminal:
                    break
                drop += 1
                self.start_offset = batch.last + 1
                continue
            assert batch.offsets is not None
            done = 0
            while done < len(batch.offsets) and batch.offsets[done].state.terminal:
                done += 1
            if done == len(batch.offsets):
                drop += 1
                self.start_offset = batch.last + 1
                continue
            if done:
                del batch.offsets[:done]
                batch.first += done
                self._firsts[drop] = batch.first
                self.start_offset = batch.first
            break
        if drop:
            del self._batches[:drop]
            del self._firsts[:drop]
        if not self._batches:
            self.start_offset = max(self.start_offset, self.next_offset)
            self.next_offset = self.start_offset


def _per_offset(batch: InFlightBatch, lo: int, hi: int) -> Iterator[tuple[int, int, InFlightState]]:
    """The per-offset states of ``lo``..``hi`` in ``batch``, splitting it only when a part of it
    is concerned."""
    if batch.batch is not None and (lo > batch.first or hi < batch.last):
        batch.split()
    if batch.batch is not None:
        yield batch.first, batch.last, batch.batch
        return
    yield from batch.states(lo, hi)


def _merged(acquired: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """Adjacent ranges with the same delivery count as one (the response's AcquiredRecords)."""
    out: list[AcquiredRecords] = []
    for item in acquired:
        previous = out[-1] if out else None
        if previous is not None and previous.last_offset + 1 == item.first_offset \
                and previous.delivery_count == item.delivery_count:
            out[-1] = AcquiredRecords(previous.first_offset, item.last_offset, item.delivery_count)
        else:
            out.append(item)
    return out
