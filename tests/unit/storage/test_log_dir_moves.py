"""Moving a replica between log dirs with Kafka's future-log protocol: the future log copies the
current one (``ReplicaAlterLogDirsManager.step``) while it keeps taking appends, follows its
truncations and retention, survives a restart, and replaces it with a rename."""

from __future__ import annotations

import os
from pathlib import Path

from broker.partition import Partition
from broker.replication.replica_alter_log_dirs_manager import MoveState, ReplicaAlterLogDirsManager
from protocol.records.batch import set_base_offset, set_partition_leader_epoch
from storage.log_config import LogConfig
from storage.log_manager import LogManager, parent_dir
from storage_test_helpers import batch, offsets_in, read_all
from tests.harness.waiting import wait_until

SMALL_SEGMENTS = LogConfig.from_props({"segment.bytes": "2048", "retention.ms": "-1"})


def _manager(tmp_path: Path, config: LogConfig | None = None) -> LogManager:
    manager = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], config or LogConfig())
    manager.startup(broker_id=0, cluster_id="c")
    return manager


def _partition(manager: LogManager, batches: int = 10) -> Partition:
    partition = Partition("t", 0, broker_id=0)
    partition.log = manager.get_or_create_log("t", 0)
    for _ in range(batches):
        partition.log.append_as_leader(batch(5), leader_epoch=0)
    partition.log.update_high_watermark(partition.log.log_end_offset)
    return partition


def _start_move(manager: LogManager, to: str) -> ReplicaAlterLogDirsManager:
    manager.maybe_update_preferred_log_dir("t", 0, to)
    manager.get_or_create_future_log("t", 0, None)
    return ReplicaAlterLogDirsManager(manager, run_blocking=None, chunk_bytes=300, backoff_ms=10)  # type: ignore[arg-type]


def _copying_to_d1(tmp_path: Path) -> tuple[LogManager, Partition, ReplicaAlterLogDirsManager]:
    """t-0 (50 records) in d0, its move to d1 one chunk in."""
    manager = _manager(tmp_path)
    partition = _partition(manager)
    mover = _start_move(manager, manager.log_dirs[1])
    assert mover.step(("t", 0), partition)[0] is MoveState.COPYING
    return manager, partition, mover


def _step_until_done(mover: ReplicaAlterLogDirsManager, partition: Partition, between: object = None) -> int:
    for steps in range(1, 1000):
        if callable(between):
            between()
        if mover.step(("t", 0), partition)[0] is MoveState.DONE:
            return steps
    raise AssertionError("the move never completed")


def test_the_future_log_copies_while_appends_go_on_then_replaces_the_current_log(tmp_path: Path) -> None:
    manager = _manager(tmp_path, SMALL_SEGMENTS)
    d0, d1 = manager.log_dirs
    partition = _partition(manager)
    old = partition.log
    assert old is not None and parent_dir(old) == d0
    mover = _start_move(manager, d1)
    appended = []

    def produce() -> None:
        if len(appended) < 20:
            appended.append(old.append_as_leader(batch(2), leader_epoch=1).last_offset)

    steps = _step_until_done(mover, partition, produce)
    assert steps > 1
    new = partition.log
    assert new is not old and new is manager.get_log("t", 0) and parent_dir(new) == d1
    assert new.dir == os.path.join(d1, "t-0") and manager.get_log("t", 0, future=True) is None
    assert offsets_in(read_all(new)) == list(range(50 + 2 * len(appended)))
    assert new.high_watermark == 50 and new.leader_epoch_cache.latest_epoch() == old.leader_epoch_cache.latest_epoch()
    assert [n for n in os.listdir(d0) if n.startswith("t-0")] == [os.path.basename(old.dir)]
    assert old.dir.endswith("-delete")
    # Whoever still holds the old log writes to the new one.
    info = old.append_as_leader(batch(1), leader_epoch=1)
    assert info.first_offset == new.log_end_offset - 1 and offsets_in(read_all(old))[-1] == info.first_offset
    assert manager.delete_logs(force=True) == 1 and not os.path.exists(old.dir)
    manager.shutdown()
    restarted = _manager(tmp_path, SMALL_SEGMENTS)
    moved = restarted.get_log("t", 0)
    assert moved is not None and parent_dir(moved) == d1 and moved.log_end_offset == info.first_offset + 1
    restarted.shutdown()


def test_a_restart_mid_move_resumes_from_the_future_log(tmp_path: Path) -> None:
    manager, partition, _ = _copying_to_d1(tmp_path)
    d1 = manager.log_dirs[1]
    copied = manager.get_log("t", 0, future=True)
    assert copied is not None and 0 < copied.log_end_offset < 50
    manager.shutdown()
    restarted = _manager(tmp_path)
    future = restarted.get_log("t", 0, future=True)
    assert future is not None and parent_dir(future) == d1 and future.log_end_offset == copied.log_end_offset
    partition.log = restarted.get_log("t", 0)
    mover = ReplicaAlterLogDirsManager(restarted, run_blocking=None, chunk_bytes=300, backoff_ms=10)  # type: ignore[arg-type]
    _step_until_done(mover, partition)
    assert partition.log is not None and parent_dir(partition.log) == d1
    assert offsets_in(read_all(partition.log)) == list(range(50))
    restarted.shutdown()


def test_the_future_log_is_cut_where_the_current_log_was_truncated(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    _, d1 = manager.log_dirs
    partition = _partition(manager)
    current = partition.log
    assert current is not None
    mover = _start_move(manager, d1)
    while mover._copy_chunk(current, manager.get_log("t", 0, future=True)):  # copy everything, no swap
        pass
    current.truncate_to(30)  # a follower cut back to a new leader's log...
    for _ in range(4):
        current.append_as_follower(_batch_at(current.log_end_offset, epoch=3))  # ...and copies it
    _step_until_done(mover, partition)
    moved = partition.log
    assert moved is not None and parent_dir(moved) == d1
    assert read_all(moved) == read_all(current)
    assert [e.epoch for e in moved.leader_epoch_cache.epoch_entries()] == [0, 3]
    manager.shutdown()


def test_retention_past_the_copy_restarts_the_future_log_at_the_log_start(tmp_path: Path) -> None:
    manager = _manager(tmp_path, SMALL_SEGMENTS)
    _, d1 = manager.log_dirs
    partition = _partition(manager, batches=30)
    current = partition.log
    assert current is not None
    mover = _start_move(manager, d1)
    mover._copy_chunk(current, manager.get_log("t", 0, future=True))
    current.maybe_increment_log_start_offset(120, from_delete_records=True)
    current.delete_old_segments()
    _step_until_done(mover, partition)
    moved = partition.log
    assert moved is not None and moved.log_start_offset == 120
    assert offsets_in(read_all(moved)) == list(range(120, 150))
    manager.shutdown()


def _batch_at(offset: int, epoch: int) -> bytearray:
    """A batch as a leader wrote it: its base offset and leader epoch set (neither is under the CRC)."""
    records = batch(2)
    set_base_offset(records, 0, offset)
    set_partition_leader_epoch(records, 0, epoch)
    return records


def test_a_move_whose_destination_dir_fails_ends_and_the_current_log_serves_on(tmp_path: Path) -> None:
    manager, partition, mover = _copying_to_d1(tmp_path)
    d0, d1 = manager.log_dirs
    manager.failure_channel.maybe_add_offline_log_dir(d1, "test", OSError("the disk went away"))
    assert manager.handle_log_dir_failure(d1) == ([], [("t", 0)])
    assert mover.step(("t", 0), partition) == (MoveState.GONE, 0)
    current = partition.log
    assert current is not None and parent_dir(current) == d0 and current is manager.get_log("t", 0)
    current.append_as_leader(batch(1), leader_epoch=0)
    assert offsets_in(read_all(current)) == list(range(51))
    manager.shutdown()


def test_replicas_on_different_threads_move_at_the_same_time(tmp_path: Path) -> None:
    """num.replica.alter.log.dirs.threads movers: a replica goes where Kafka's getFetcherId puts it
    (abs(31 * topic.hashCode() + partition) % threads), and two threads copy side by side."""
    import asyncio
    import threading

    manager = _manager(tmp_path)
    partitions = {}
    for index in (0, 1):
        partition = Partition("t", index, broker_id=0)
        partition.log = manager.get_or_create_log("t", index)
        for _ in range(20):
            partition.log.append_as_leader(batch(5), leader_epoch=0)
        partition.log.update_high_watermark(partition.log.log_end_offset)
        manager.maybe_update_preferred_log_dir("t", index, manager.log_dirs[1])
        manager.get_or_create_future_log("t", index, None)
        partitions[("t", index)] = partition
    steps_at_once, running = [0], [0]
    lock, overlapped = threading.Lock(), threading.Event()

    async def run_blocking(function, *args):  # type: ignore[no-untyped-def]
        def counted():  # type: ignore[no-untyped-def]
            with lock:
                running[0] += 1
                steps_at_once[0] = max(steps_at_once[0], running[0])
                if running[0] == 2:
                    overlapped.set()
            try:
                # Each step waits for a step of the other thread, which only a second mover thread can run.
                overlapped.wait(10)
                return function(*args)
            finally:
                with lock:
                    running[0] -= 1
        return await asyncio.get_running_loop().run_in_executor(None, counted)

    async def move_both() -> ReplicaAlterLogDirsManager:
        mover = ReplicaAlterLogDirsManager(manager, run_blocking, chunk_bytes=300, backoff_ms=10, num_threads=2)
        # "t".hashCode() is 116: partition 0 -> 31 * 116 % 2 = 0, partition 1 -> 1
        assert [mover.threads.index(mover.thread_for(tp)) for tp in partitions] == [0, 1]
        await mover.add_partitions(partitions)
        await wait_until(lambda: not mover.moving, "both moves done")
        await mover.shutdown()
        return mover

    mover = asyncio.run(move_both())
    assert not mover.moving and steps_at_once[0] == 2
    assert all(parent_dir(manager.get_log("t", i)) == manager.log_dirs[1] for i in (0, 1))
    assert all(offsets_in(read_all(manager.get_log("t", i))) == list(range(100)) for i in (0, 1))
