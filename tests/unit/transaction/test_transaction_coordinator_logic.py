"""The transaction coordinator against real logs and a fake WriteTxnMarkers channel: the flows and
errors of Kafka 3.9's TransactionCoordinator, the markers it sends and the records it writes."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from broker.coordinator.transaction import transaction_coordinator
from broker.coordinator.transaction.transaction_metadata import MAX_PRODUCER_EPOCH, TransactionState
from broker.coordinator.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC
from protocol.errors import Errors
from tests.unit.transaction.txn_fakes import Harness

S = TransactionState
OFFSETS = "__consumer_offsets"


def run(tmp_path: Path, scenario: Callable[[Harness], Awaitable[None]], **config: object) -> None:
    async def main() -> None:
        harness = Harness(tmp_path, **config)
        harness.cache.leaders.update({("orders", 0): 1, ("orders", 1): 2, (OFFSETS, 3): 1})
        await harness.start()
        try:
            await scenario(harness)
        finally:
            await harness.stop()

    asyncio.run(main())


async def _begin(h: Harness, txn_id: str = "txn", partitions: frozenset = frozenset({("orders", 0), ("orders", 1)})
                 ) -> tuple[int, int]:
    error, pid, epoch = await h.coordinator.handle_init_producer_id(txn_id, 60000, None)
    assert error is Errors.NONE
    assert await h.coordinator.handle_add_partitions_to_transaction(txn_id, pid, epoch, set(partitions)) is Errors.NONE
    return pid, epoch


def test_init_producer_id_bumps_the_epoch_and_writes_empty(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        first = await h.coordinator.handle_init_producer_id("txn", 60000, None)
        second = await h.coordinator.handle_init_producer_id("txn", 30000, None)
        assert (first.error, first.producer_epoch, second.producer_epoch) == (Errors.NONE, 0, 1)
        assert first.producer_id == second.producer_id == 1001
        written = h.replicas.txn_log_records()
        assert [(txn, v.producer_epoch, v.transaction_status, v.transaction_partitions, v.transaction_timeout_ms)
                for txn, v in written] == [("txn", 0, 0, None, 60000), ("txn", 1, 0, None, 30000)]
        assert all(v.version == 0 and v.transaction_start_timestamp_ms == -1 for _, v in written)
        idempotent = await h.coordinator.handle_init_producer_id(None, 0, None)
        assert (idempotent.error, idempotent.producer_id, idempotent.producer_epoch) == (Errors.NONE, 1002, 0)
    run(tmp_path, scenario)


@pytest.mark.parametrize(("txn_id", "timeout", "error"), [
    ("", 60000, Errors.INVALID_REQUEST), ("txn", 0, Errors.INVALID_TRANSACTION_TIMEOUT),
    ("txn", 900001, Errors.INVALID_TRANSACTION_TIMEOUT)])
def test_init_producer_id_rejects_bad_ids_and_timeouts(tmp_path: Path, txn_id: str, timeout: int,
                                                       error: Errors) -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.coordinator.handle_init_producer_id(txn_id, timeout, None)).error is error
    run(tmp_path, scenario)


def test_commit_writes_prepare_then_markers_then_complete(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        assert await h.coordinator.handle_add_partitions_to_transaction("txn", pid, epoch, {(OFFSETS, 3)}) is Errors.NONE
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_COMMIT)
        markers = sorted(h.sender.markers())
        assert markers == [(1, pid, epoch, True, Harness.COORDINATOR_EPOCH, [(OFFSETS, 3), ("orders", 0)]),
                           (2, pid, epoch, True, Harness.COORDINATOR_EPOCH, [("orders", 1)])]
        states = [(v.transaction_status, sorted((p.topic, i) for p in v.transaction_partitions or ()
                                                for i in p.partition_ids))
                  for _, v in h.replicas.txn_log_records()]
        assert states == [(0, []), (1, [("orders", 0), ("orders", 1)]),
                          (1, [(OFFSETS, 3), ("orders", 0), ("orders", 1)]),
                          (2, [(OFFSETS, 3), ("orders", 0), ("orders", 1)]), (4, [])]
        # Retrying the commit after it completed is fine; aborting it now is not.
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=False) is Errors.INVALID_TXN_STATE
    run(tmp_path, scenario)


def test_the_next_transaction_waits_briefly_for_the_markers_of_the_last(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """AddPartitionsToTxn right after a commit (as librdkafka sends it) is answered once the markers
    are written, instead of CONCURRENT_TRANSACTIONS and the client's 20 ms back-off (the wait is
    stretched here so that the marker sender's retry falls within it on a loaded machine too)."""
    monkeypatch.setattr(transaction_coordinator, "COMPLETION_HOLD_S", 30.0)

    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h, partitions=frozenset({("orders", 0)}))
        h.sender.down.add(1)  # the markers wait ...
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        asyncio.get_running_loop().call_later(0.01, h.sender.down.clear)  # ... 10 ms
        assert h.metadata("txn").state is S.PREPARE_COMMIT
        assert await h.coordinator.handle_add_partitions_to_transaction("txn", pid, epoch, {("orders", 1)}) is Errors.NONE
        assert (h.metadata("txn").state, h.metadata("txn").topic_partitions) == (S.ONGOING, {("orders", 1)})
    run(tmp_path, scenario)


def test_end_txn_errors(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        assert await c.handle_end_transaction("unknown", 1, 0, commit=True) is Errors.INVALID_PRODUCER_ID_MAPPING
        error, pid, epoch = await c.handle_init_producer_id("txn", 60000, None)
        assert await c.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.INVALID_TXN_STATE  # Empty
        await c.handle_add_partitions_to_transaction("txn", pid, epoch, {("orders", 0)})
        assert await c.handle_end_transaction("txn", pid + 1, epoch, commit=True) is Errors.INVALID_PRODUCER_ID_MAPPING
        assert await c.handle_end_transaction("txn", pid, epoch - 1, commit=True) is Errors.PRODUCER_FENCED
        assert await c.handle_end_transaction("txn", pid, epoch + 1, commit=True) is Errors.PRODUCER_FENCED
        assert await c.handle_end_transaction("", pid, epoch, commit=True) is Errors.INVALID_REQUEST
        h.sender.down.add(1)  # the marker for orders-0 cannot be written: the transaction stays in PrepareAbort
        assert await c.handle_end_transaction("txn", pid, epoch, commit=False) is Errors.NONE
        assert await c.handle_end_transaction("txn", pid, epoch, commit=False) is Errors.CONCURRENT_TRANSACTIONS
        assert await c.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.CONCURRENT_TRANSACTIONS
        assert await c.handle_add_partitions_to_transaction("txn", pid, epoch, {("orders", 1)}) is \
            Errors.CONCURRENT_TRANSACTIONS
        assert (await c.handle_init_producer_id("txn", 60000, None)).error is Errors.CONCURRENT_TRANSACTIONS
        h.sender.down.clear()
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_ABORT)
        assert await c.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.INVALID_TXN_STATE
    run(tmp_path, scenario)


def test_add_partitions_errors_and_no_rewrite_of_known_partitions(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        assert await c.handle_add_partitions_to_transaction("unknown", 1, 0, {("orders", 0)}) is \
            Errors.INVALID_PRODUCER_ID_MAPPING
        pid, epoch = await _begin(h)
        written = len(h.replicas.txn_log_records())
        assert await c.handle_add_partitions_to_transaction("txn", pid, epoch, {("orders", 0)}) is Errors.NONE
        assert len(h.replicas.txn_log_records()) == written
        assert await c.handle_add_partitions_to_transaction("txn", pid + 5, epoch, {("orders", 0)}) is \
            Errors.INVALID_PRODUCER_ID_MAPPING
        assert await c.handle_add_partitions_to_transaction("txn", pid, epoch - 1, {("orders", 0)}) is \
            Errors.PRODUCER_FENCED
        assert await c.handle_add_partitions_to_transaction("", pid, epoch, {("orders", 0)}) is Errors.INVALID_REQUEST
    run(tmp_path, scenario)


def test_a_failed_append_leaves_the_state_and_clears_the_pending_transition(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        for append_error, answered in [(Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
                                       (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
                                       (Errors.REQUEST_TIMED_OUT, Errors.COORDINATOR_NOT_AVAILABLE)]:
            h.replicas.fail_with = append_error
            assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is answered
            assert (h.metadata("txn").state, h.metadata("txn").pending_state) == (S.ONGOING, None)
        h.replicas.fail_with = None
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
    run(tmp_path, scenario)


def test_init_producer_id_on_an_ongoing_transaction_fences_and_aborts_it(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        h.sender.down.add(1)
        assert (await h.coordinator.handle_init_producer_id("txn", 60000, None)).error is Errors.CONCURRENT_TRANSACTIONS
        m = h.metadata("txn")
        assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)  # the old producer is fenced already
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.PRODUCER_FENCED
        h.sender.down.clear()
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_ABORT)
        assert {(m[1], m[2], m[3]) for m in h.sender.markers()} == {(pid, epoch + 1, False)}
        again = await h.coordinator.handle_init_producer_id("txn", 60000, None)
        assert (again.error, again.producer_id, again.producer_epoch) == (Errors.NONE, pid, epoch + 2)
    run(tmp_path, scenario)


def test_kip_360_recovery_with_a_known_producer_id_and_epoch(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        c = h.coordinator
        first = await c.handle_init_producer_id("txn", 60000, None)
        pid = first.producer_id
        bumped = await c.handle_init_producer_id("txn", 60000, (pid, 0))
        assert (bumped.error, bumped.producer_epoch) == (Errors.NONE, 1)
        retried = await c.handle_init_producer_id("txn", 60000, (pid, 0))  # the answer was lost: same epoch
        assert (retried.error, retried.producer_epoch) == (Errors.NONE, 1)
        assert (await c.handle_init_producer_id("txn", 60000, (pid + 9, 1))).error is Errors.PRODUCER_FENCED
        assert (await c.handle_init_producer_id("txn", 60000, None)).producer_epoch == 2  # a new producer
        assert (await c.handle_init_producer_id("txn", 60000, (pid, 1))).error is Errors.PRODUCER_FENCED
        fresh = await c.handle_init_producer_id("fresh", 60000, (555, 3))  # just created: the new id is safe
        assert (fresh.error, fresh.producer_epoch) == (Errors.NONE, 0) and fresh.producer_id != 555
    run(tmp_path, scenario)


def test_exhausted_epoch_gets_a_new_producer_id(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        first = await h.coordinator.handle_init_producer_id("txn", 60000, None)
        h.metadata("txn").producer_epoch = MAX_PRODUCER_EPOCH - 1
        rotated = await h.coordinator.handle_init_producer_id("txn", 60000, (first.producer_id, MAX_PRODUCER_EPOCH - 1))
        assert (rotated.error, rotated.producer_epoch) == (Errors.NONE, 0)
        assert rotated.producer_id != first.producer_id
        # The same request again (its answer lost): the old id with the exhausted epoch is still let through.
        retried = await h.coordinator.handle_init_producer_id("txn", 60000, (first.producer_id, MAX_PRODUCER_EPOCH - 1))
        assert (retried.error, retried.producer_id) == (Errors.NONE, rotated.producer_id)
    run(tmp_path, scenario)


def test_markers_are_retried_across_errors_dead_brokers_and_leader_moves(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        failures = {(1, ("orders", 0)): [Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS]}
        h.sender.answer = lambda broker, tp: failures.get((broker, tp), [Errors.NONE]).pop(0) \
            if failures.get((broker, tp)) else Errors.NONE
        h.sender.down.add(2)
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        await h.until(lambda: h.metadata("txn").topic_partitions == {("orders", 1)})
        h.cache.leaders[("orders", 1)] = 0  # broker 2 died: orders-1 moved to broker 0
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_COMMIT)
        sent = [(broker, tps) for broker, _pid, _e, _c, _ce, tps in h.sender.markers()]
        assert sent.count((1, [("orders", 0)])) == 3 and (0, [("orders", 1)]) in sent
    run(tmp_path, scenario)


def test_unknown_leaders_wait_and_deleted_topics_are_dropped(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        h.cache.leaders[("gone", 0)] = 1
        pid, epoch = await _begin(h, partitions=frozenset({("orders", 0), ("gone", 0)}))
        h.cache.alive.discard(1)  # the leader is not alive: markers wait for a live leader
        del h.cache.leaders[("gone", 0)]  # ... and this topic is deleted meanwhile
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=False) is Errors.NONE
        await h.until(lambda: h.metadata("txn").topic_partitions == {("orders", 0)})
        assert h.sender.requests == []
        h.cache.alive.add(1)
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_ABORT)
        assert [tps for *_, tps in h.sender.markers()] == [[("orders", 0)]]
    run(tmp_path, scenario)


def test_obsolete_markers_are_abandoned(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h, partitions=frozenset({("orders", 0)}))
        h.sender.answer = lambda broker, tp: Errors.INVALID_PRODUCER_EPOCH
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        await h.until(lambda: h.coordinator.marker_channel.num_txns_with_pending_markers() == 0)
        assert h.metadata("txn").state is S.PREPARE_COMMIT and len(h.sender.requests) == 1
    run(tmp_path, scenario)


def test_timed_out_transactions_are_aborted_with_a_bumped_epoch(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        await _begin(h, "young")
        h.metadata("txn").txn_start_timestamp -= 120_000
        await h.coordinator.abort_timed_out_transactions()
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_ABORT)
        assert h.metadata("txn").producer_epoch == epoch + 1 and h.metadata("young").state is S.ONGOING
        assert {(m[1], m[2], m[3]) for m in h.sender.markers()} == {(pid, epoch + 1, False)}
        assert await h.coordinator.handle_add_partitions_to_transaction("txn", pid, epoch, {("orders", 0)}) is \
            Errors.PRODUCER_FENCED
    run(tmp_path, scenario)


def test_a_new_coordinator_completes_a_prepared_commit_from_the_log(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        h.sender.down.update({1, 2})
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        await _begin(h, "open")
        # Leadership moves away and back (a new coordinator epoch): state is rebuilt from the log.
        h.coordinator.on_leadership_change(TRANSACTION_STATE_TOPIC, 0, False, 6)
        assert not h.coordinator.state_manager.transaction_metadata_cache
        h.sender.down.clear()
        await h.elect(7)
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_COMMIT)
        assert h.metadata("open").state is S.ONGOING and h.metadata("open").topic_partitions == {
            ("orders", 0), ("orders", 1)}
        assert {(m[1], m[2], m[3], m[4]) for m in h.sender.markers() if m[4] == 7} == {(pid, epoch, True, 7)}
    run(tmp_path, scenario)


def test_loading_answers_load_in_progress_and_followers_answer_not_coordinator(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        manager = h.coordinator.state_manager
        manager.loading_partitions[0] = 9
        assert (await h.coordinator.handle_init_producer_id("txn", 60000, None)).error is \
            Errors.COORDINATOR_LOAD_IN_PROGRESS
        assert h.coordinator.handle_list_transactions(set(), set())[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
        del manager.loading_partitions[0]
        h.coordinator.on_leadership_change(TRANSACTION_STATE_TOPIC, 0, False, 6)
        assert (await h.coordinator.handle_init_producer_id("txn", 60000, None)).error is Errors.NOT_COORDINATOR
        assert h.coordinator.handle_describe_transactions("txn").error is Errors.NOT_COORDINATOR
    run(tmp_path, scenario)


def test_verify_only_answers_per_partition(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h, partitions=frozenset({("orders", 0)}))
        verify = h.coordinator.handle_verify_partitions_in_transaction
        assert verify("txn", pid, epoch, {("orders", 0), ("orders", 1)}) == {
            ("orders", 0): Errors.NONE, ("orders", 1): Errors.TRANSACTION_ABORTABLE}
        assert verify("txn", pid, epoch + 1, {("orders", 0)}) == {("orders", 0): Errors.PRODUCER_FENCED}
        assert verify("txn", pid + 1, epoch, {("orders", 0)}) == {("orders", 0): Errors.INVALID_PRODUCER_ID_MAPPING}
        assert verify("nope", pid, epoch, {("orders", 0)}) == {("orders", 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    run(tmp_path, scenario)


def test_list_and_describe(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        empty = await h.coordinator.handle_init_producer_id("idle", 60000, None)
        error, unknown, listed = h.coordinator.handle_list_transactions(set(), {"Ongoing", "Bogus"})
        assert (error, unknown, [(t.transactional_id, t.state) for t in listed]) == (
            Errors.NONE, ["Bogus"], [("txn", S.ONGOING)])
        _, _, by_pid = h.coordinator.handle_list_transactions({empty.producer_id}, set())
        assert [t.transactional_id for t in by_pid] == ["idle"]
        h.metadata("txn").txn_start_timestamp = int(time.time() * 1000) - 60_000
        _, _, old = h.coordinator.handle_list_transactions(set(), {"Ongoing"}, 30_000)
        _, _, none_that_old = h.coordinator.handle_list_transactions(set(), {"Ongoing"}, 600_000)
        assert ([t.transactional_id for t in old], none_that_old) == (["txn"], [])
        error, m = h.coordinator.handle_describe_transactions("txn")
        assert (error, m.producer_id, m.producer_epoch, m.state, m.topic_partitions) == (
            Errors.NONE, pid, epoch, S.ONGOING, {("orders", 0), ("orders", 1)})
        assert h.coordinator.handle_describe_transactions("nope").error is Errors.TRANSACTIONAL_ID_NOT_FOUND
        assert h.coordinator.handle_describe_transactions("").error is Errors.INVALID_REQUEST
    run(tmp_path, scenario)


def test_idle_transactional_ids_expire_with_a_tombstone(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.coordinator.handle_init_producer_id("idle", 60000, None)
        await _begin(h, "busy")
        await asyncio.sleep(0.01)  # past transactional.id.expiration.ms (1): on a fast machine all above takes <1 ms
        await h.coordinator.state_manager.remove_expired_transactional_ids()
        assert h.replicas.txn_log_records()[-1] == ("idle", None)
        assert h.coordinator.state_manager.get_transaction_state("idle") is None
        assert h.coordinator.state_manager.get_transaction_state("busy") is not None
        h.coordinator.on_leadership_change(TRANSACTION_STATE_TOPIC, 0, False, 6)
        await h.elect(7)  # the tombstone keeps it gone after a reload
        assert h.coordinator.state_manager.get_transaction_state("idle") is None
    run(tmp_path, scenario, transactional_id_expiration_ms=1)


def test_the_completion_is_retried_while_the_log_is_unavailable(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await _begin(h)
        h.sender.down.update({1, 2})
        assert await h.coordinator.handle_end_transaction("txn", pid, epoch, commit=True) is Errors.NONE
        h.replicas.fail_with = Errors.NOT_ENOUGH_REPLICAS
        h.sender.down.clear()
        await h.until(lambda: not h.metadata("txn").topic_partitions)
        await asyncio.sleep(0.05)  # a few failed completion appends
        assert (h.metadata("txn").state, h.metadata("txn").pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
        h.replicas.fail_with = None
        await h.until(lambda: h.metadata("txn").state is S.COMPLETE_COMMIT)
    run(tmp_path, scenario)
