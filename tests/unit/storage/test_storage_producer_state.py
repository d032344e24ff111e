"""Idempotent and transactional producer state: Kafka's sequence/epoch rules, LSO, .txnindex, snapshots."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from storage.log import FetchIsolation, Log
from storage.producer_state import (
    SENTINEL_GUARD,
    AppendOrigin,
    ProducerStateEntry,
    ProducerStateManagerConfig,
    decode_snapshot,
    encode_snapshot,
)
from storage.transaction_index import AbortedTxn
from storage_test_helpers import batch, marker, offsets_in, open_log, read_all

PID = 1000


def _send(log: Log, count: int, seq: int, epoch: int = 0, pid: int = PID, transactional: bool = False):  # type: ignore[no-untyped-def]
    now = int(time.time() * 1000)  # producers idle past producer.id.expiration.ms are dropped on load
    # a transactional write is preceded by its (here: successful) verification with the coordinator
    guard = log.maybe_start_transaction_verification(pid, seq, epoch) if transactional else SENTINEL_GUARD
    return log.append_as_leader(
        batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional, timestamp=now),
        leader_epoch=0, verification_guard=guard,
    )


def _end(log: Log, commit: bool, epoch: int = 0, pid: int = PID, coordinator_epoch: int = 0):  # type: ignore[no-untyped-def]
    return log.append_as_leader(
        marker(pid, epoch, commit, coordinator_epoch), leader_epoch=0, origin=AppendOrigin.COORDINATOR
    )


def test_duplicates_return_the_original_offsets_without_appending(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 3, 0)
    _send(log, 2, 3)
    dup = _send(log, 3, 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 2)
    assert log.log_end_offset == 5
    assert _send(log, 1, 5).first_offset == 5


def test_only_the_last_five_batches_are_deduplicated(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(6):
        _send(log, 1, seq)
    assert _send(log, 1, 1).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        _send(log, 1, 0)  # fell out of the retained window


def test_sequence_and_epoch_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert _send(log, 1, 7).first_offset == 0  # an unknown producer may start at any sequence
    with pytest.raises(OutOfOrderSequenceError):
        _send(log, 1, 9)
    with pytest.raises(OutOfOrderSequenceError):
        _send(log, 1, 3, epoch=1)  # a new epoch must start at 0
    _send(log, 1, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        _send(log, 1, 8, epoch=0)
    assert log.log_end_offset == 2
    # replication appends are trusted: no sequence checks
    follower = open_log(tmp_path / "f-0")
    follower.append_as_follower(batch(1, producer_id=PID, producer_epoch=0, base_sequence=50))
    follower.append_as_follower(_rebased(batch(1, producer_id=PID, producer_epoch=0, base_sequence=90), 1))
    assert follower.producers.last_entry(PID).last_seq == 90  # type: ignore[union-attr]


def _rebased(buf: bytearray, offset: int) -> bytearray:
    from protocol.records.batch import set_base_offset

    set_base_offset(buf, 0, offset)
    return buf


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 1, 0x7FFFFFFF)
    _send(log, 2, 0)


def test_transactions_last_stable_offset_and_aborted_index(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 2, 0, transactional=True)  # 0-1, producer 1000
    _send(log, 1, 0, pid=2000, transactional=True)  # 2, producer 2000
    _send(log, 1, 2, transactional=True)  # 3
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset == 0 and log.last_stable_offset == 0
    with pytest.raises(InvalidTxnStateError):
        _send(log, 1, 3)  # non-transactional write inside an open transaction
    abort = _end(log, commit=False)  # marker at 4
    assert abort.first_offset == 4
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2  # producer 2000's transaction is still open
    segment = log.active_segment
    assert segment.txn_index.all_aborted_txns() == [AbortedTxn(PID, 0, 4, 2)]
    _end(log, commit=True, pid=2000)  # marker at 5
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 6 and log.first_unstable_offset is None
    info = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert info.aborted_transactions == [AbortedTxn(PID, 0, 4, 2)]
    assert offsets_in(info.records.read_bytes()) == [0, 1, 2, 3, 4, 5]
    assert log.read(5, 1 << 20, FetchIsolation.TXN_COMMITTED).aborted_transactions == []


def test_fenced_coordinator_and_empty_marker(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 1, 0, transactional=True)
    _end(log, commit=True, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        _end(log, commit=False, coordinator_epoch=4)
    info = _end(log, commit=False, coordinator_epoch=5)  # no open transaction: nothing completes
    assert info.completed_txns == [] and log.active_segment.txn_index.all_aborted_txns() == []


def test_producer_state_survives_clean_restart_via_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 2, 0, epoch=3)
    _send(log, 1, 0, pid=2000, transactional=True)
    log.close()
    snapshot = tmp_path / "t-0" / "00000000000000000003.snapshot"
    entries = {e.producer_id: e for e in decode_snapshot(snapshot.read_bytes())}
    assert entries[PID].producer_epoch == 3 and entries[PID].last_seq == 1
    assert entries[2000].current_txn_first_offset == 2
    reopened = open_log(tmp_path / "t-0", had_clean_shutdown=True, recovery_point=3)
    assert _send(reopened, 2, 0, epoch=3).duplicate
    assert reopened.first_unstable_offset == 2
    reopened.close()


def test_unclean_restart_rebuilds_producer_state_and_txn_index(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 2, 0, transactional=True)
    _end(log, commit=False)
    _send(log, 1, 2)
    for segment in log.segments:  # crash: nothing closed, then lose the snapshot and txn index too
        segment.log.close()
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith((".snapshot", ".txnindex")):
            os.remove(tmp_path / "t-0" / name)
    reopened = open_log(tmp_path / "t-0")
    assert reopened.producers.last_entry(PID).last_seq == 2  # type: ignore[union-attr]
    assert reopened.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(PID, 0, 2, 3)]
    with pytest.raises(OutOfOrderSequenceError):
        _send(reopened, 1, 5)
    reopened.close()


def test_corrupt_snapshot_is_deleted_and_state_rebuilt(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 1, 0)
    log.close()
    snapshot = tmp_path / "t-0" / "00000000000000000001.snapshot"
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    reopened = open_log(tmp_path / "t-0", had_clean_shutdown=True, recovery_point=1)
    assert reopened.producers.last_entry(PID).last_seq == 0  # type: ignore[union-attr]
    assert offsets_in(read_all(reopened)) == [0]
    reopened.close()


def test_snapshot_encoding() -> None:
    assert encode_snapshot([]) == bytes.fromhex("000148674BC700000000")
    entry = ProducerStateEntry(7, producer_epoch=2, coordinator_epoch=1, current_txn_first_offset=40)
    entry.add_batch(2, 9, 44, 4, 123)
    data = encode_snapshot([entry])
    assert len(data) == 10 + 46
    (decoded,) = decode_snapshot(data)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.last_seq, decoded.first_seq) == (7, 2, 9, 5)
    assert decoded.current_txn_first_offset == 40 and decoded.last_data_offset == 44


def test_idle_producers_expire_unless_in_a_transaction(tmp_path: Path) -> None:
    log = Log(str(tmp_path / "t-0"), open_log(tmp_path / "x-0").config,
              producer_state_config=ProducerStateManagerConfig(producer_id_expiration_ms=1000))
    _send(log, 1, 0)
    _send(log, 1, 0, pid=2000, transactional=True)
    later = int(time.time() * 1000) + 5000
    log.remove_expired_producers(later)
    assert log.producers.last_entry(PID) is None and log.producers.last_entry(2000) is not None
    assert _send(log, 1, 17).first_offset == 2  # forgotten: any sequence is accepted again


def _raw_txn_send(log: Log, seq: int, guard=SENTINEL_GUARD, epoch: int = 0):  # type: ignore[no-untyped-def]
    data = batch(1, producer_id=PID, producer_epoch=epoch, base_sequence=seq, transactional=True,
                 timestamp=int(time.time() * 1000))
    return log.append_as_leader(data, leader_epoch=0, verification_guard=guard)


def test_a_transaction_starts_only_with_the_guard_of_its_verification(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    with pytest.raises(InvalidTxnStateError):
        _raw_txn_send(log, 0)  # never verified
    guard = log.maybe_start_transaction_verification(PID, 0, 0)
    assert log.maybe_start_transaction_verification(PID, 0, 0) is guard  # one pending verification per producer
    _raw_txn_send(log, 0, guard)
    assert log.maybe_start_transaction_verification(PID, 1, 0) is SENTINEL_GUARD  # ongoing: nothing to verify
    assert log.maybe_start_transaction_verification(PID, 1, 1) is SENTINEL_GUARD  # whatever the epoch (3.9)
    _raw_txn_send(log, 1)
    _end(log, commit=True)
    stale = log.maybe_start_transaction_verification(PID, 2, 0)  # verified while the coordinator times it out
    _end(log, commit=False, epoch=1)
    with pytest.raises(InvalidTxnStateError):
        _raw_txn_send(log, 0, stale, epoch=1)  # verified before the abort marker: cleared by it (ABA)
    fresh = log.maybe_start_transaction_verification(PID, 0, 1)
    assert fresh is not stale
    _raw_txn_send(log, 0, fresh, epoch=1)


def test_a_verified_transaction_starts_at_the_lowest_sequence_seen(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.maybe_start_transaction_verification(PID, 3, 0)
    guard = log.maybe_start_transaction_verification(PID, 1, 0)  # a retry of an earlier batch
    with pytest.raises(OutOfOrderSequenceError):
        _raw_txn_send(log, 3, guard)
    _raw_txn_send(log, 1, guard)


def test_verification_disabled_lets_any_transactional_write_start(tmp_path: Path) -> None:
    log = Log(str(tmp_path / "t-0"), open_log(tmp_path / "x-0").config,
              producer_state_config=ProducerStateManagerConfig(transaction_verification_enabled=False))
    assert _raw_txn_send(log, 0).first_offset == 0


def test_unused_verifications_expire_with_idle_producers(tmp_path: Path) -> None:
    log = Log(str(tmp_path / "t-0"), open_log(tmp_path / "x-0").config,
              producer_state_config=ProducerStateManagerConfig(producer_id_expiration_ms=1000))
    stale = log.maybe_start_transaction_verification(PID, 0, 0)
    log.remove_expired_producers(int(time.time() * 1000) + 5000)
    with pytest.raises(InvalidTxnStateError):
        _raw_txn_send(log, 0, stale)


def test_aborted_transactions_overlapping_a_fetch_are_all_returned(tmp_path: Path) -> None:
    """A later abort whose transaction began before the fetched range still counts: the index is
    only complete past an entry whose last stable offset reaches the bound (Kafka's rule)."""
    log = open_log(tmp_path / "t-0")
    _send(log, 1, 0, pid=2000, transactional=True)  # 0: producer 2000 starts first
    _send(log, 2, 0, transactional=True)  # 1-2
    _end(log, commit=False)  # 3: aborts 1-2 while 2000 is still open (LSO 0)
    _send(log, 1, 1, pid=2000, transactional=True)  # 4
    _end(log, commit=False, pid=2000)  # 5: aborts 0-4
    log.update_high_watermark(log.log_end_offset)
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(PID, 1, 3, 0), AbortedTxn(2000, 0, 5, 6)]
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(PID, 1, 3, 0), AbortedTxn(2000, 0, 5, 6)]


def test_last_stable_offset_never_falls_below_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _send(log, 3, 0, transactional=True)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    log.maybe_increment_log_start_offset(2, from_delete_records=True)
    assert log.last_stable_offset == 2
