"""ReplicaAlterLogDirsManager: moves replicas between this broker's log dirs (AlterReplicaLogDirs).

Kafka's ReplicaAlterLogDirsManager and its ``num.replica.alter.log.dirs.threads``
ReplicaAlterLogDirsThreads (by default one per log dir), each an asyncio task whose blocking
steps run on the handler pool's threads; a replica goes to the thread Kafka's fetcher manager
would give it (``abs(31 * topic.hashCode() + partition) % threads``), so moves of replicas on
different threads copy in parallel. For each replica being moved a thread copies the current log into the partition's
future log (``<topic>-<partition>.<uuid>-future`` in the destination dir) a chunk of
``replica.fetch.max.bytes`` at a time, batches unchanged, while the current log keeps serving
produce and fetch. The future log follows the current one as a follower follows its leader:
it takes its high watermark and log start offset, restarts at the log start when retention
passed it, and is cut back by leader epochs when the current log was truncated (a leader
change) so the two never disagree. Once the future log has everything, the swap
(``LogManager.replace_current_with_future``) happens under the current log's lock, so no
append slips in between; the batches that arrived since the last chunk are copied under that
lock too, so a move completes under steady produce. As Kafka's threads, each moves one replica at
a time, in topic-partition order (each move finishes sooner), and all together stay within
``replica.alter.log.dirs.io.max.bytes.per.second``. Logs left by a crash are picked up again:
the LogManager loads ``-future`` dirs and the ReplicaManager resumes their moves.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING

from broker.coordinator.internal_topic import java_string_hash, kafka_abs
from broker.replication.replica_fetcher import RunBlocking, offset_truncation_state
from storage.errors import StorageError
from storage.log import FetchIsolation, Log

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replication.replication_quota import ReplicationQuotaManager
    from storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MAX_TRUNCATION_ROUNDS = 1000


class MoveState(enum.Enum):
    COPYING = "Copying"  # copied some, more to come
    IDLE = "Idle"  # nothing to copy yet and not swapped (waits a back-off)
    DONE = "Done"  # the future log replaced the current one
    GONE = "Gone"  # the current or future log is no longer there


class ReplicaAlterLogDirsThread:
    """One of Kafka's ReplicaAlterLogDirsThreads: moves its replicas one at a time."""

    def __init__(self, thread_id: int, manager: ReplicaAlterLogDirsManager) -> None:
        self.name = f"ReplicaAlterLogDirsThread-{thread_id}"
        self.manager = manager
        self.moving: dict[TopicPartition, Partition] = {}
        self._delayed_until: dict[TopicPartition, float] = {}  # event-loop time
        # Held while a step runs; ``remove_partitions`` takes it, so no step is under way afterwards.
        self.processing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def add_partitions(self, partitions: dict[TopicPartition, Partition]) -> None:
        run_blocking = self.manager.run_blocking
        async with self.processing:
            added = {tp: p for tp, p in partitions.items() if tp not in self.moving}
            for tp in added:
                await run_blocking(self.manager.log_manager.abort_and_pause_cleaning, tp)
            self.moving.update(added)
        if added:
            log.info("[%s] Moving replicas %s between log dirs", self.name, sorted(added))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def remove_partitions(self, tps: list[TopicPartition]) -> None:
        async with self.processing:
            for tp in tps:
                self._delayed_until.pop(tp, None)
                if self.moving.pop(tp, None) is not None:
                    await self.manager.run_blocking(self.manager.log_manager.resume_cleaning, tp)

    async def shutdown(self) -> None:
        self.moving.clear()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        manager, quota = self.manager, self.manager.quota
        while self.moving:
            if quota is not None and quota.is_quota_exceeded():
                await asyncio.sleep(quota.window_s)
                continue
            now = loop.time()
            ready = [tp for tp in self.moving if self._delayed_until.get(tp, 0.0) <= now]
            if not ready:
                await asyncio.sleep(min(self._delayed_until[tp] for tp in self.moving) - now)
                continue
            tp = min(ready)  # Kafka's selectPartitionToFetch: one move at a time, in order
            async with self.processing:
                partition = self.moving.get(tp)
                if partition is None:
                    continue
                try:
                    state, copied = await manager.run_blocking(manager.step, tp, partition)
                except StorageError as exc:  # a failed dir also goes offline through its channel
                    log.error("Moving %s-%d between log dirs failed: %s", *tp, exc)
                    state, copied = MoveState.GONE, 0
                except Exception:  # as Kafka's fetcher threads mark a partition failed: the others go on
                    log.exception("Moving %s-%d between log dirs failed", *tp)
                    state, copied = MoveState.GONE, 0
                if quota is not None:
                    quota.record(copied)
                if state is MoveState.IDLE:
                    self._delayed_until[tp] = loop.time() + manager.backoff_ms / 1000
                elif state in (MoveState.DONE, MoveState.GONE):
                    del self.moving[tp]
                    self._delayed_until.pop(tp, None)
                if state is MoveState.GONE:  # the swap itself resumes cleaning
                    await manager.run_blocking(manager.log_manager.resume_cleaning, tp)


class ReplicaAlterLogDirsManager:
    def __init__(self, log_manager: LogManager, run_blocking: RunBlocking, chunk_bytes: int, backoff_ms: int,
                 quota: ReplicationQuotaManager | None = None, num_threads: int = 1) -> None:
        self.log_manager = log_manager
        self.run_blocking = run_blocking
        self.chunk_bytes = max(1, chunk_bytes)
        self.backoff_ms = backoff_ms
        self.quota = quota
        self.threads = [ReplicaAlterLogDirsThread(i, self) for i in range(max(1, num_threads))]

    def thread_for(self, tp: TopicPartition) -> ReplicaAlterLogDirsThread:
        """Kafka's AbstractFetcherManager.getFetcherId (Java int arithmetic)."""
        mixed = (31 * java_string_hash(tp[0]) + tp[1] + (1 << 31)) % (1 << 32) - (1 << 31)
        return self.threads[kafka_abs(mixed) % len(self.threads)]

    @property
    def moving(self) -> dict[TopicPartition, Partition]:
        return {tp: p for thread in self.threads for tp, p in thread.moving.items()}

    async def add_partitions(self, partitions: dict[TopicPartition, Partition]) -> None:
        """Start moving these replicas (those not moving yet): their cleaning pauses until the move
        ends, as Kafka's does."""
        grouped: dict[ReplicaAlterLogDirsThread, dict[TopicPartition, Partition]] = {}
        for tp, partition in partitions.items():
            grouped.setdefault(self.thread_for(tp), {})[tp] = partition
        for thread, group in grouped.items():
            await thread.add_partitions(group)

    async def remove_partitions(self, tps: list[TopicPartition]) -> None:
        """Stop moving these replicas: no step is under way for them once this returns."""
        grouped: dict[ReplicaAlterLogDirsThread, list[TopicPartition]] = {}
        for tp in tps:
            grouped.setdefault(self.thread_for(tp), []).append(tp)
        for thread, mine in grouped.items():
            await thread.remove_partitions(mine)

    async def shutdown(self) -> None:
        await asyncio.gather(*(thread.shutdown() for thread in self.threads))

    # --- one step, on a pool thread -----------------------------------------------------------
    def step(self, tp: TopicPartition, partition: Partition) -> tuple[MoveState, int]:
        """Copy one chunk; when the future log is at the current log's end, finish under its lock.
        Returns the state and the bytes copied."""
        current = partition.log
        future = self.log_manager.get_log(*tp, future=True)
        if current is None or future is None:
            return MoveState.GONE, 0
        copied = self._copy_chunk(current, future)
        if future.log_end_offset < current.log_end_offset:
            return (MoveState.COPYING if copied else MoveState.IDLE), copied
        with current.exclusive():
            if self.log_manager.get_log(*tp, future=True) is not future or partition.log is not current:
                return MoveState.COPYING, copied  # replaced meanwhile: look again
            while chunk := self._copy_chunk(current, future):
                copied += chunk
            if future.log_end_offset != current.log_end_offset:
                return MoveState.COPYING, copied
            self.log_manager.replace_current_with_future(*tp)
        return MoveState.DONE, copied

    def _copy_chunk(self, current: Log, future: Log) -> int:
        """Bring the future log in line with the current one and append its next batches; the bytes copied."""
        self._truncate_diverged(current, future)
        if future.log_end_offset < current.log_start_offset:  # retention passed the copy: restart there
            future.truncate_fully_and_start_at(current.log_start_offset)
        with current.exclusive():  # no truncation of the current log between finding and reading
            start = future.log_end_offset
            data = b""
            if current.log_start_offset <= start < current.log_end_offset:
                data = current.read(start, self.chunk_bytes, FetchIsolation.LOG_END).records.read_bytes()
        if data:
            future.append_as_follower(data)
        future.maybe_increment_log_start_offset(current.log_start_offset)
        future.update_high_watermark(current.high_watermark)
        return len(data)

    @staticmethod
    def _truncate_diverged(current: Log, future: Log) -> None:
        """Cut the future log where its epochs stop matching the current log's (the current log
        was truncated since it was copied), as a follower is cut against its leader."""
        for _ in range(MAX_TRUNCATION_ROUNDS):  # each round drops at least one epoch of the future log
            latest = future.leader_epoch_cache.latest_epoch()
            if latest is None:
                if future.log_end_offset > current.log_end_offset:
                    future.truncate_to(current.log_end_offset)
                return
            leader_epoch, end_offset = current.end_offset_for_epoch(latest)
            if leader_epoch == latest and end_offset >= future.log_end_offset:
                return
            offset, completed = offset_truncation_state(future, leader_epoch, end_offset)
            if offset < future.log_end_offset:
                log.info("Truncating the future log of %s to offset %d: the current log diverged",
                         future.topic_partition, offset)
            if offset < future.log_end_offset or not completed:
                future.truncate_to(offset)  # also drops epochs from the offset on
            if completed:
                return
