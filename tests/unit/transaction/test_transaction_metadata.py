"""TransactionMetadata: Kafka's legal transitions, the pending state, epoch bumps and fencing."""
from __future__ import annotations

import pytest

from broker.coordinator.transaction.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransactionStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol.errors import Errors, KafkaApiError

S = TransactionState


def _metadata(state: TransactionState = S.EMPTY, epoch: int = 3, partitions: set | None = None,
              start: int = -1) -> TransactionMetadata:
    return TransactionMetadata("txn", 42, NO_PRODUCER_ID, epoch, NO_PRODUCER_EPOCH, 60000, state, partitions,
                               start, 100)


def test_states_have_kafkas_ids_names_and_previous_states() -> None:
    assert [(s.value, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    previous = {s.state_name: sorted(p.state_name for p in s.valid_previous_states) for s in S}
    assert previous == {
        "Empty": ["CompleteAbort", "CompleteCommit", "Empty"],
        "Ongoing": ["CompleteAbort", "CompleteCommit", "Empty", "Ongoing"],
        "PrepareCommit": ["Ongoing"], "PrepareAbort": ["Ongoing", "PrepareEpochFence"],
        "CompleteCommit": ["PrepareCommit"], "CompleteAbort": ["PrepareAbort"],
        "Dead": ["CompleteAbort", "CompleteCommit", "Empty"], "PrepareEpochFence": ["Ongoing"]}
    assert {s for s in S if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_name("PrepareCommit") is S.PREPARE_COMMIT and S.from_name("Nope") is None


def test_a_whole_commit_cycle_through_prepared_transitions() -> None:
    m = _metadata()
    transit = m.prepare_add_partitions(frozenset({("t", 0)}), 1_000)
    assert m.pending_state is S.ONGOING and m.state is S.EMPTY  # nothing applied before the log has it
    m.complete_transition_to(transit)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp, m.pending_state) == (S.ONGOING, {("t", 0)}, 1_000, None)
    m.complete_transition_to(m.prepare_add_partitions(frozenset({("t", 1)}), 2_000))
    assert m.txn_start_timestamp == 1_000 and m.topic_partitions == {("t", 0), ("t", 1)}
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 3_000))
    m.remove_partition(("t", 0))
    complete = m.prepare_complete(4_000)
    assert complete.topic_partitions == frozenset() and complete.txn_state is S.COMPLETE_COMMIT
    m.complete_transition_to(complete)
    assert (m.state, m.topic_partitions, m.txn_last_update_timestamp) == (S.COMPLETE_COMMIT, set(), 4_000)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.PREPARE_ABORT])
def test_end_transaction_from_a_state_other_than_ongoing_is_illegal(state: TransactionState) -> None:
    with pytest.raises(IllegalTransactionStateError):
        _metadata(state).prepare_abort_or_commit(S.PREPARE_COMMIT, 1)


def test_a_second_prepare_while_one_is_pending_is_illegal() -> None:
    m = _metadata()
    m.prepare_add_partitions(frozenset({("t", 0)}), 1)
    assert m.pending_transition_in_progress
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_add_partitions(frozenset({("t", 1)}), 2)


def test_completing_something_else_than_the_pending_transition_is_illegal() -> None:
    m = _metadata()
    transit = m.prepare_add_partitions(frozenset({("t", 0)}), 1)
    m.pending_state = S.EMPTY
    with pytest.raises(IllegalTransactionStateError):
        m.complete_transition_to(transit)


def test_epoch_bumps_for_init_producer_id() -> None:
    m = _metadata(epoch=3)
    transit = m.prepare_increment_producer_epoch(30000, None, 5)
    assert (transit.producer_epoch, m.pending_state) == (4, S.EMPTY)
    m.complete_transition_to(transit)
    assert (m.producer_epoch, m.last_producer_epoch, m.txn_timeout_ms) == (4, NO_PRODUCER_EPOCH, 30000)
    m.complete_transition_to(_bump(m, 4))  # KIP-360: the current epoch -> bump, remembering it
    assert (m.producer_epoch, m.last_producer_epoch) == (5, 4)
    m.complete_transition_to(_bump(m, 4))  # a retry of that bump gets the same epoch again
    assert (m.producer_epoch, m.last_producer_epoch) == (5, 4)
    with pytest.raises(KafkaApiError) as fenced:
        _bump(m, 2)
    assert fenced.value.error is Errors.PRODUCER_FENCED


def _bump(m: TransactionMetadata, expected: int | None) -> TxnTransitMetadata:
    return m.prepare_increment_producer_epoch(30000, expected, 5)


def test_fencing_bumps_once_even_after_a_failed_fence() -> None:
    m = _metadata(S.ONGOING, epoch=3, partitions={("t", 0)}, start=10)
    fence = m.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch, fence.last_producer_epoch) == (S.PREPARE_EPOCH_FENCE, 4, -1)
    m.pending_state = None
    m.has_failed_epoch_fence = True  # the bumped epoch never reached the log nor a client
    assert m.prepare_fence_producer_epoch().producer_epoch == 3
    with pytest.raises(IllegalTransactionStateError):  # fencing is never completed in place
        m.complete_transition_to(fence)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    m = _metadata(S.COMPLETE_ABORT, epoch=MAX_PRODUCER_EPOCH - 1)
    assert m.is_producer_epoch_exhausted
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_increment_producer_epoch(60000, None, 1)
    transit = m.prepare_producer_id_rotation(77, 60000, 1, record_last_epoch=True)
    m.complete_transition_to(transit)
    assert (m.producer_id, m.producer_epoch, m.last_producer_id, m.last_producer_epoch) == \
        (77, 0, 42, MAX_PRODUCER_EPOCH - 1)


def test_dead_is_only_prepared_never_completed() -> None:
    m = _metadata(S.COMPLETE_COMMIT)
    transit = m.prepare_dead()
    assert transit.txn_state is S.DEAD
    with pytest.raises(IllegalTransactionStateError):
        m.complete_transition_to(transit)


def test_removing_a_partition_outside_prepare_states_is_a_bug() -> None:
    with pytest.raises(IllegalTransactionStateError):
        _metadata(S.ONGOING, partitions={("t", 0)}).remove_partition(("t", 0))
