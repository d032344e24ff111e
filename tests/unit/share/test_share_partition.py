"""SharePartition's state machine: acquisition, acknowledgement, locks, delivery counts, start offset."""

from __future__ import annotations

import pytest

from broker.share.share_partition import (
    AcknowledgeType as Ack,
    AcquiredRecords,
    FetchedBatch,
    InFlightState,
    InvalidRecordState,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from protocol.errors import Errors

CONFIG = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=100)


def _partition(start: int = 0, config: SharePartitionConfig = CONFIG) -> SharePartition:
    return SharePartition(start, config)


def test_new_batches_are_acquired_whole_and_once():
    sp = _partition()
    got = sp.acquire("a", [FetchedBatch(0, 4), FetchedBatch(5, 9)], max_records=3, now_ms=0)
    assert got == [AcquiredRecords(0, 4, 1)]  # whole first batch although over max_records; stops after
    assert sp.acquire("b", [FetchedBatch(0, 4), FetchedBatch(5, 9)], max_records=100, now_ms=0) == [
        AcquiredRecords(5, 9, 1)]
    assert sp.fetch_offset() == 10 and sp.start_offset == 0


def test_accept_moves_the_start_offset_and_is_final():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 9)], 100, 0)
    assert sp.acknowledge("a", [(0, 4, [Ack.ACCEPT])], 1) is Errors.NONE
    assert sp.start_offset == 5
    assert sp.acknowledge("a", [(0, 0, [Ack.ACCEPT])], 1) is Errors.INVALID_RECORD_STATE
    assert sp.acknowledge("a", [(5, 9, [Ack.ACCEPT])], 1) is Errors.NONE
    assert sp.start_offset == sp.next_offset == 10 and sp.state_batches() == []


def test_only_the_holder_may_acknowledge_and_a_bad_batch_changes_nothing():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 3)], 100, 0)
    assert sp.acknowledge("b", [(0, 0, [Ack.ACCEPT])], 1) is Errors.INVALID_RECORD_STATE
    # the first range is fine, the second is not: nothing is applied
    assert sp.acknowledge("a", [(0, 1, [Ack.ACCEPT]), (3, 4, [Ack.ACCEPT])], 1) is Errors.INVALID_RECORD_STATE
    assert sp.record_state(0).state is RecordState.ACQUIRED
    assert sp.acknowledge("a", [(2, 1, [Ack.ACCEPT])], 1) is Errors.INVALID_REQUEST
    assert sp.acknowledge("a", [(0, 3, [Ack.ACCEPT, Ack.ACCEPT])], 1) is Errors.INVALID_REQUEST
    assert sp.acknowledge("a", [(0, 3, [9])], 1) is Errors.INVALID_REQUEST
    assert sp.record_state(0).state is RecordState.ACQUIRED


def test_per_offset_types_split_the_batch_and_gaps_are_archived():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 3)], 100, 0)
    assert sp.acknowledge("a", [(0, 3, [Ack.ACCEPT, Ack.GAP, Ack.RELEASE, Ack.REJECT])], 1) is Errors.NONE
    assert sp.start_offset == 2
    assert sp.record_state(2).state is RecordState.AVAILABLE
    assert sp.record_state(3).state is RecordState.ARCHIVED
    assert sp.fetch_offset() == 2
    assert sp.acquire("b", [FetchedBatch(0, 3)], 100, 5) == [AcquiredRecords(2, 2, 2)]


def test_released_records_are_redelivered_until_the_delivery_limit_then_archived():
    sp = _partition()
    for delivery in (1, 2, 3):
        assert sp.acquire("a", [FetchedBatch(0, 1)], 100, 0) == [AcquiredRecords(0, 1, delivery)]
        assert sp.acknowledge("a", [(0, 1, [Ack.RELEASE])], 0) is Errors.NONE
    assert sp.acquire("a", [FetchedBatch(0, 1)], 100, 0) == []
    assert sp.start_offset == 2  # archived records no longer hold the start offset


def test_lock_expiry_and_member_release_make_records_available_again():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 1)], 100, now_ms=0)
    sp.acquire("b", [FetchedBatch(2, 3)], 100, now_ms=500)
    assert sp.expire_locks(999) == 0 and sp.expire_locks(1000) == 2
    assert sp.acknowledge("a", [(0, 0, [Ack.ACCEPT])], 1001) is Errors.INVALID_RECORD_STATE
    assert sp.release_member("b") == 2
    assert sp.acquire("c", [FetchedBatch(0, 1), FetchedBatch(2, 3)], 100, 2000) == [AcquiredRecords(0, 3, 2)]


def test_renew_extends_the_lock():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 0)], 100, 0)
    assert sp.acknowledge("a", [(0, 0, [Ack.RENEW])], 900) is Errors.NONE
    assert sp.expire_locks(1000) == 0 and sp.expire_locks(1900) == 1


def test_partial_acquisition_of_available_records_respects_max_records():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 9)], 100, 0)
    sp.release_member("a")
    assert sp.acquire("b", [FetchedBatch(0, 9)], 4, 0) == [AcquiredRecords(0, 9, 2)]  # whole batch stays whole
    sp.acknowledge("b", [(0, 9, [Ack.RELEASE] * 5 + [Ack.ACCEPT] * 5)], 0)
    assert sp.acquire("c", [FetchedBatch(0, 9)], 2, 0) == [AcquiredRecords(0, 1, 3)]


def test_the_in_flight_window_is_bounded_by_max_record_locks():
    sp = _partition(config=SharePartitionConfig(1000, 5, max_record_locks=10))
    assert sp.acquire("a", [FetchedBatch(0, 7), FetchedBatch(8, 15), FetchedBatch(16, 20)], 100, 0) == [
        AcquiredRecords(0, 15, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("a", [(0, 7, [Ack.ACCEPT])], 0)
    assert sp.can_acquire()


def test_skipped_batches_are_archived_not_delivered():
    sp = _partition()
    got = sp.acquire("a", [FetchedBatch(0, 2), FetchedBatch(3, 4, skip=True), FetchedBatch(5, 5)], 100, 0)
    assert got == [AcquiredRecords(0, 2, 1), AcquiredRecords(5, 5, 1)]
    sp.acknowledge("a", [(0, 2, [Ack.ACCEPT])], 0)
    assert sp.start_offset == 5


def test_offsets_missing_from_the_log_are_archived():
    sp = _partition(start=10)
    assert sp.acquire("a", [FetchedBatch(14, 15)], 100, 0) == [AcquiredRecords(14, 15, 1)]
    assert sp.record_state(12) is None and sp.start_offset == 14  # archived, so behind the start


def test_state_batches_persist_acquired_as_available_and_restore():
    sp = _partition()
    sp.acquire("a", [FetchedBatch(0, 5)], 100, 0)
    sp.acknowledge("a", [(0, 5, [Ack.RELEASE, Ack.ACCEPT, Ack.ACCEPT, Ack.REJECT, Ack.RELEASE, Ack.RELEASE])], 0)
    sp.acquire("b", [FetchedBatch(0, 5)], 1, 0)
    batches = sp.state_batches()
    assert batches == [StateBatch(0, 0, RecordState.AVAILABLE, 2), StateBatch(1, 2, RecordState.ACKNOWLEDGED, 1),
                       StateBatch(3, 3, RecordState.ARCHIVED, 1), StateBatch(4, 5, RecordState.AVAILABLE, 1)]
    restored = SharePartition(sp.start_offset, CONFIG, batches)
    assert restored.fetch_offset() == 0 and restored.next_offset == 6
    assert restored.acquire("c", [FetchedBatch(0, 5)], 100, 0) == [AcquiredRecords(0, 0, 3), AcquiredRecords(4, 5, 2)]


def test_final_states_allow_no_transition():
    state = InFlightState(RecordState.ACKNOWLEDGED, 1)
    with pytest.raises(InvalidRecordState):
        state.transition(RecordState.AVAILABLE)
    with pytest.raises(InvalidRecordState):
        InFlightState(RecordState.AVAILABLE, 0).transition(RecordState.ACKNOWLEDGED)
