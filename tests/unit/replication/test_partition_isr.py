"""The leader's view of its followers: high watermark, ISR expand and shrink (broker.partition)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.partition import FollowerState, Partition
from broker.replica_manager import ReplicaManager
from protocol.errors import Errors, KafkaApiError
from tests.harness.waiting import wait_until
from tests.unit.storage.storage_test_helpers import batch, config, open_log


def _state(leader: int, epoch: int, isr: list[int], replicas: list[int] | None = None,
           partition_epoch: int = 0) -> SimpleNamespace:
    return SimpleNamespace(leader=leader, leader_epoch=epoch, isr=isr, replicas=replicas or [0, 1, 2],
                           partition_epoch=partition_epoch, controller_epoch=1)


@pytest.fixture
def leader(tmp_path: Path) -> Partition:
    log = open_log(tmp_path / "t-0", config(min_insync_replicas=2))
    partition = Partition("t", 0, broker_id=0)
    partition.make_leader(_state(0, 3, [0, 1, 2]), log)
    return partition


def _append(partition: Partition, count: int) -> None:
    assert partition.log is not None
    partition.log.append_as_leader(batch(count), partition.leader_epoch)
    partition.maybe_increment_high_watermark()


def test_high_watermark_is_the_smallest_log_end_in_the_isr(leader: Partition) -> None:
    _append(leader, 10)
    assert leader.log is not None and leader.log.high_watermark == 0
    assert not leader.update_follower_fetch_state(1, 10)  # follower 2 has nothing yet
    assert leader.update_follower_fetch_state(2, 6)
    assert leader.log.high_watermark == 6
    assert leader.update_follower_fetch_state(2, 10)
    assert leader.log.high_watermark == 10
    assert not leader.update_follower_fetch_state(7, 10)  # not a replica: ignored


def test_new_leader_epoch_starts_at_the_log_end(leader: Partition) -> None:
    _append(leader, 4)
    assert leader.log is not None
    leader.make_leader(_state(0, 4, [0, 1, 2]), leader.log)
    assert leader.leader_epoch_start_offset == 4
    assert leader.log.end_offset_for_epoch(3) == (3, 4)


def test_caught_up_time_follows_kafkas_rule() -> None:
    follower = FollowerState()
    follower.update_fetch_state(fetch_offset=10, leader_end_offset=10, now_ms=1_000)
    assert follower.last_caught_up_time_ms == 1_000
    # Behind the current end, but it has all the leader had at its previous fetch: caught up as of then.
    follower.update_fetch_state(fetch_offset=10, leader_end_offset=15, now_ms=2_000)
    assert follower.last_caught_up_time_ms == 1_000
    follower.update_fetch_state(fetch_offset=15, leader_end_offset=20, now_ms=3_000)
    assert follower.last_caught_up_time_ms == 2_000
    follower.update_fetch_state(fetch_offset=16, leader_end_offset=25, now_ms=4_000)
    assert follower.last_caught_up_time_ms == 2_000  # it never got to 20: not caught up


def test_shrink_drops_exactly_the_followers_past_the_lag(tmp_path: Path) -> None:
    partition = Partition("t", 0, broker_id=0)
    partition.make_leader(_state(0, 1, [0, 1, 2]), open_log(tmp_path / "t-0"))
    partition.followers[1].last_caught_up_time_ms = 10_000
    partition.followers[2].last_caught_up_time_ms = 4_000
    assert partition.isr_to_shrink(lag_time_max_ms=5_000, current_ms=10_000) == [0, 1]
    partition.pending_isr = [0, 1]  # one change at a time
    assert partition.isr_to_shrink(lag_time_max_ms=5_000, current_ms=10_000) is None


def test_a_caught_up_follower_rejoins_through_the_maximal_isr(tmp_path: Path) -> None:
    partition = Partition("t", 0, broker_id=0)
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(5), 0)
    partition.make_leader(_state(0, 1, [0, 1]), log)
    partition.update_follower_fetch_state(1, 5)
    assert log.high_watermark == 5
    log.append_as_leader(batch(3), 1)
    partition.update_follower_fetch_state(2, 4)
    assert partition.isr_to_expand(2) is None  # below the high watermark
    partition.update_follower_fetch_state(2, 5)
    assert partition.isr_to_expand(2) == [0, 1, 2]
    partition.pending_isr = [0, 1, 2]
    # In flight: the high watermark already waits for the joining follower.
    assert partition.maximal_isr == [0, 1, 2]
    partition.update_follower_fetch_state(1, 8)
    assert log.high_watermark == 5
    assert partition.apply_isr_change(1, [0, 1, 2], partition_epoch=1)
    assert (partition.isr, partition.pending_isr, partition.partition_epoch) == ([0, 1, 2], None, 1)
    assert not partition.apply_isr_change(0, [0], partition_epoch=2)  # an answer for an older epoch


def test_min_insync_replicas(leader: Partition) -> None:
    leader.check_min_isr(required_acks=-1)
    leader.isr = [0]
    with pytest.raises(KafkaApiError) as raised:
        leader.check_min_isr(required_acks=-1)
    assert raised.value.error == Errors.NOT_ENOUGH_REPLICAS
    leader.check_min_isr(required_acks=1)
    _append(leader, 2)
    assert leader.check_enough_replicas_reach_offset(2) == (True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_acks_all_waits_for_the_high_watermark(leader: Partition) -> None:
    _append(leader, 3)
    assert leader.check_enough_replicas_reach_offset(3) == (False, Errors.NONE)
    leader.update_follower_fetch_state(1, 3)
    leader.update_follower_fetch_state(2, 3)
    assert leader.check_enough_replicas_reach_offset(3) == (True, Errors.NONE)
    assert leader.log is not None
    leader.make_follower(_state(1, 4, [0, 1, 2]), leader.log)
    assert leader.check_enough_replicas_reach_offset(4) == (True, Errors.NOT_LEADER_OR_FOLLOWER)


# --- truncation on fetch (KIP-595): where a fetcher's log diverges from the leader's ----------------

@pytest.fixture
def leader_with_epochs(tmp_path: Path) -> Partition:
    """Epoch 1 at offsets 0..4, epoch 3 at 5..9; now leading at epoch 4 with nothing written yet."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(5), 1)
    log.append_as_leader(batch(5), 3)
    partition = Partition("t", 0, broker_id=0)
    partition.make_leader(_state(0, 4, [0, 1, 2]), log)
    return partition


def test_a_fetcher_on_the_leaders_history_reads_on(leader_with_epochs: Partition) -> None:
    assert leader_with_epochs.diverging_epoch(3, 7) is None
    assert leader_with_epochs.diverging_epoch(3, 10) is None  # ends where epoch 3 ends


def test_a_fetcher_past_the_end_of_its_epoch_here_diverges(leader_with_epochs: Partition) -> None:
    # It wrote epoch 1 up to offset 8; here epoch 1 ended at 5: truncate to 5.
    assert leader_with_epochs.diverging_epoch(1, 8) == (1, 5)


def test_a_fetcher_with_an_epoch_the_leader_never_had_diverges(leader_with_epochs: Partition) -> None:
    # Epoch 2 never reached this leader: the largest epoch below it is 1, ending at 5.
    assert leader_with_epochs.diverging_epoch(2, 7) == (1, 5)


def test_an_epoch_newer_than_the_leaders_is_out_of_range(leader_with_epochs: Partition) -> None:
    with pytest.raises(KafkaApiError) as raised:
        leader_with_epochs.diverging_epoch(9, 10)
    assert raised.value.error is Errors.OFFSET_OUT_OF_RANGE


def test_isr_expiration_outlives_an_unexpected_error() -> None:
    """Kafka's scheduler logs a task's exception and runs it again: so does the isr-expiration loop."""
    checks: list[int] = []

    def shrink(lag_time_max_ms: int) -> None:
        checks.append(lag_time_max_ms)
        if len(checks) == 1:
            raise KeyError("a partition that went away")

    async def run() -> None:
        task = asyncio.ensure_future(ReplicaManager.run_isr_expiration(SimpleNamespace(maybe_shrink_isr=shrink), 10))
        await wait_until(lambda: len(checks) >= 3, "three ISR expiration checks")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    assert checks[:3] == [10, 10, 10]
