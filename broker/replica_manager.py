"""ReplicaManager: the partitions this broker hosts, and reads and writes on their logs.

It applies the controller's LeaderAndIsr and StopReplica, appends producer batches to led
partitions (blocking log work goes to the handler pool's threads) and reads fetch data.
Requests that must wait (acks=all produce, long-poll fetch) are parked in purgatories and
completed when an append or a high-watermark move touches one of their partitions.

Replication: followed partitions are handed to the ReplicaFetcherManager; as leader, the
followers' fetches move the high watermark and let caught-up followers rejoin the ISR, and a
periodic check drops followers that lag (both proposed to the controller through the
AlterPartitionManager).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.delayed_operation import DelayedOperationPurgatory
from broker.delayed_produce import DelayedProduce
from broker.errors import error_of
from broker.metrics.broker_topic_stats import BrokerTopicStats
from broker.partition import NO_EPOCH, Partition, now_ms
from coordination.admin_zk_client import validate_topic_name
from coordination.errors import InvalidTopicError
from protocol.errors import Errors, KafkaApiError
from protocol.messages import LeaderAndIsrResponse, ProduceResponse, StopReplicaResponse
from protocol.schema import ZERO_UUID
from storage.errors import KafkaStorageError, StorageError
from storage.file_records import FileRecords
from storage.log import FetchIsolation, Log, LogAppendInfo
from storage.log_files import FUTURE_DIR_SUFFIX, suffixed_dir_name
from storage.log_manager import LogManager, parent_dir
from storage.log_validator import Batches
from storage.meta_properties import InconsistentMetadataError
from storage.producer_state import SENTINEL_GUARD, AppendOrigin, VerificationGuard
from storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager, TransactionSupportedOperation
    from broker.metadata_cache import MetadataCache
    from broker.replication.alter_partition_manager import AlterPartitionManager
    from broker.replication.replica_alter_log_dirs_manager import ReplicaAlterLogDirsManager
    from broker.replication.replica_fetcher_manager import ReplicaFetcherManager
    from broker.replication.replication_quota import ReplicationQuotaManager

log = logging.getLogger(__name__)
STOP_REPLICA_LOGGED = 20  # partitions named in the StopReplica log line (a topic deletion stops thousands)

TopicPartition = tuple[str, int]
EPOCH_DURING_DELETE = -2
# Replica logs a LeaderAndIsr opens at once: enough to overlap their file creation and fsyncs,
# few enough to leave the I/O pool's other threads to the requests of clients.
LOG_OPENING_PARALLELISM = 4
RunBlocking = Callable[..., Awaitable[Any]]


@dataclass(slots=True)
class FetchPartitionSpec:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    log_start_offset: int = -1
    last_fetched_epoch: int = NO_EPOCH  # Fetch v12+: the epoch of the fetcher's last batch


@dataclass(slots=True)
class PartitionReadResult:
    error: Errors = Errors.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRecords | bytes = b""
    aborted_transactions: list[AbortedTxn] | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) the fetcher must truncate to



class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, metadata_cache: MetadataCache,
                 run_blocking: RunBlocking, inter_broker_listener: str = "PLAINTEXT") -> None:
        self.broker_id = broker_id
        self.inter_broker_listener = inter_broker_listener
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.run_blocking = run_blocking
        self._state_change_lock = asyncio.Lock()  # LeaderAndIsr and StopReplica, one at a time
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_stats = BrokerTopicStats()
        self.isr_shrinks = 0  # ISR changes the controller accepted (IsrShrinksPerSec, IsrExpandsPerSec)
        self.isr_expands = 0
        self.produce_purgatory = DelayedOperationPurgatory("Produce")
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch")
        self.broker_epoch = -1
        # Called as (topic, partition, is_leader, leader_epoch) after this broker becomes leader or
        # follower of a partition, and with is_leader False when it stops hosting it; the group
        # coordinator loads and unloads the groups of __consumer_offsets partitions this way.
        self.leadership_listeners: list[Callable[[str, int, bool, int], None]] = []
        # Set by the server once built (they need the running loop); None in tests without replication.
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.alter_partition_manager: AlterPartitionManager | None = None
        self.alter_log_dirs_manager: ReplicaAlterLogDirsManager | None = None  # moves between log dirs
        self.leader_quota: ReplicationQuotaManager | None = None  # throttled replication, leader side
        self.add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = None  # KIP-890 verification
        self._leader_endpoints: dict[int, tuple[str, int]] = {}  # from LeaderAndIsr's live leaders
        # Partitions whose log dir failed: KAFKA_STORAGE_ERROR until deleted (Kafka's HostedPartition.Offline).
        self.offline_partitions: set[TopicPartition] = set()
        # Set by the server: tells the controller (through ZooKeeper) that a log dir of ours failed.
        self.propagate_log_dir_event: Callable[[], Awaitable[None]] | None = None

    # --- lookups ----------------------------------------------------------------------------
    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def local_log(self, topic: str, partition: int) -> Log | None:
        """The log of a partition this broker hosts, as leader or follower (Kafka's ``localLog``)."""
        found = self.partitions.get((topic, partition))
        return None if found is None else found.log

    def leader_partition(self, topic: str, partition: int) -> Partition:
        """The led partition, or the error Kafka gives for it (unknown vs not leader)."""
        return self.leader_partition_and_log(topic, partition)[0]

    def leader_partition_and_log(self, topic: str, partition: int) -> tuple[Partition, Log]:
        """``leader_partition`` and its log, for the produce path (one lookup of each)."""
        found = self.partitions.get((topic, partition))
        if found is not None and found.log is not None and (topic, partition) not in self.offline_partitions:
            return found, found.leader_log()
        if (topic, partition) in self.offline_partitions:
            raise KafkaApiError(Errors.KAFKA_STORAGE_ERROR, f"{topic}-{partition} is in a failed log dir")
        if self.metadata_cache.partition(topic, partition) is not None:
            raise KafkaApiError(Errors.NOT_LEADER_OR_FOLLOWER)
        raise KafkaApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)

    # --- controller requests ----------------------------------------------------------------
    async def become_leader_or_follower(self, request: Any, version: int,
                                        topic_config: Callable[[str], dict[str, str]]) -> Any:
        """LeaderAndIsr (v2+): per partition create the log and become leader or follower.

        One controller request at a time (Kafka's replicaStateChangeLock): each partition's epoch is
        checked before the logs are opened and applied after, so a request arriving meanwhile (an
        older one, on another connection) must not apply its epoch in between."""
        async with self._state_change_lock:
            return await self._become_leader_or_follower(request, version, topic_config)

    async def _become_leader_or_follower(self, request: Any, version: int,
                                         topic_config: Callable[[str], dict[str, str]]) -> Any:
        for topic_state in request.topic_states:
            try:  # a log directory is named after the topic: never outside the log dir
                validate_topic_name(topic_state.topic_name)
            except InvalidTopicError as exc:  # Kafka fails the whole request on such a name
                raise KafkaApiError(Errors.UNKNOWN_SERVER_ERROR, f"LeaderAndIsr for an illegal topic: {exc}") from None
        for leader in request.live_leaders:
            self._leader_endpoints[leader.broker_id] = (leader.host_name, leader.port)
        results: dict[str, list[Any]] = {}
        topic_ids: dict[str, Any] = {}
        configs: dict[str, dict[str, str]] = {}
        for topic_state in request.topic_states:
            topic_ids[topic_state.topic_name] = topic_state.topic_id
            if topic_state.topic_name not in configs:
                configs[topic_state.topic_name] = await self.run_blocking(topic_config, topic_state.topic_name)
        refusals = {(ts.topic_name, state.partition_index): self._refusal(ts.topic_name, ts.topic_id, state)
                    for ts in request.topic_states for state in ts.partition_states}
        accepted = [(ts.topic_name, ts.topic_id, state) for ts in request.topic_states for state in ts.partition_states
                    if refusals[ts.topic_name, state.partition_index] is None]
        # As Kafka's makeLeaders: the fetchers of every partition to lead stop first, once.
        await self._stop_fetching([(topic, state.partition_index) for topic, _, state in accepted
                                   if state.leader == self.broker_id])
        opened = self._open_replica_logs(accepted, configs)
        for topic_state in request.topic_states:
            topic = topic_state.topic_name
            for state in topic_state.partition_states:
                tp = (topic, state.partition_index)
                error = refusals[tp] or await self._apply_partition_state(topic, topic_state.topic_id, state, opened[tp])
                results.setdefault(topic, []).append(
                    LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                        topic_name=topic, partition_index=state.partition_index, error_code=int(error)))
        if version >= 5:
            return LeaderAndIsrResponse(error_code=0, topics=[
                LeaderAndIsrResponse.LeaderAndIsrTopicError(topic_id=topic_ids[t], partition_errors=errs)
                for t, errs in results.items()])
        return LeaderAndIsrResponse(error_code=0, partition_errors=[e for errs in results.values() for e in errs])

    def _refusal(self, topic: str, topic_id: Any, state: Any) -> Errors | None:
        """Kafka's error for a LeaderAndIsr partition state this broker does not apply, or None.

        An older leader epoch is refused, and so is the current one, unless it only brings a topic id
        the log lacks, or tells a follower the topic has none (Kafka's topic id upgrade and downgrade
        without a new epoch): Kafka answers STALE_CONTROLLER_EPOCH to both."""
        tp = (topic, state.partition_index)
        partition = self.partitions.get(tp)
        if partition is not None and state.leader_epoch < partition.leader_epoch:
            log.info("Ignoring LeaderAndIsr for %s-%d: leader epoch %d is older than the current %d",
                     topic, state.partition_index, state.leader_epoch, partition.leader_epoch)
            return Errors.STALE_CONTROLLER_EPOCH
        if partition is not None and state.leader_epoch == partition.leader_epoch:
            with_id = topic_id != ZERO_UUID
            if not (with_id and partition.topic_id is None
                    or not with_id and partition.topic_id is not None and state.leader != self.broker_id):
                log.info("Ignoring LeaderAndIsr for %s-%d: its leader epoch %d is the current one",
                         topic, state.partition_index, state.leader_epoch)
                return Errors.STALE_CONTROLLER_EPOCH
        if self.broker_id not in state.replicas:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if tp in self.offline_partitions:
            return Errors.KAFKA_STORAGE_ERROR
        return None

    def _open_replica_logs(self, states: list[tuple[str, Any, Any]], configs: dict[str, dict[str, str]],
                           ) -> dict[TopicPartition, asyncio.Future[Log]]:
        """Each replica's log, opened or created a few at a time in the I/O pool rather than one
        after the other (a new topic, or every partition at start-up). A replica this broker is to
        lead and does not lead yet has its new leader epoch checkpointed there too: nothing
        appends to it meanwhile (clients are refused, its fetcher is stopped), and make_leader
        finds the epoch in place instead of writing the checkpoint on the event loop."""
        slots = asyncio.Semaphore(LOG_OPENING_PARALLELISM)

        def open_log(topic: str, topic_id: Any, state: Any, first_epoch: bool) -> Log:
            tp_log = self.log_manager.get_or_create_log(
                topic, state.partition_index, configs[topic], topic_id if topic_id != ZERO_UUID else None,
                is_new=state.is_new)
            if first_epoch:
                tp_log.assign_epoch_at_log_end(state.leader_epoch)
            return tp_log

        async def in_slot(topic: str, topic_id: Any, state: Any) -> Log:
            hosted = self.partitions.get((topic, state.partition_index))
            first_epoch = state.leader == self.broker_id and (hosted is None or not hosted.is_leader)
            async with slots:
                return await self.run_blocking(open_log, topic, topic_id, state, first_epoch)

        return {(topic, state.partition_index): asyncio.ensure_future(in_slot(topic, topic_id, state))
                for topic, topic_id, state in states}

    async def _apply_partition_state(self, topic: str, topic_id: Any, state: Any, opened: asyncio.Future[Log]) -> Errors:
        tp = (topic, state.partition_index)
        partition = self.partitions.get(tp)
        try:
            tp_log = await opened
        except InconsistentMetadataError as exc:
            log.error("LeaderAndIsr for %s-%d: %s", topic, state.partition_index, exc)
            return Errors.INCONSISTENT_TOPIC_ID
        except StorageError as exc:  # Kafka's markPartitionOffline: KAFKA_STORAGE_ERROR until deleted
            log.error("Skipped the become-%s state change for %s-%d since the replica for the partition is offline "
                      "due to storage error %s", "leader" if state.leader == self.broker_id else "follower",
                      topic, state.partition_index, exc)
            await self._stop_fetching([tp])
            self.offline_partitions.add(tp)
            if self.partitions.pop(tp, None) is not None:
                self.complete_delayed_requests(tp)
            return Errors.KAFKA_STORAGE_ERROR
        if partition is None:
            partition = self.partitions[tp] = Partition(topic, state.partition_index, self.broker_id)
        partition.topic_id = topic_id if topic_id != ZERO_UUID else None
        if state.leader == self.broker_id:
            await self._stop_fetching([tp])
            if partition.make_leader(state, tp_log):
                log.info("Leader %s-%d starts at leader epoch %d from offset %d (ISR %s)", topic,
                         state.partition_index, state.leader_epoch, tp_log.log_end_offset, list(state.isr))
        elif partition.leader_epoch != state.leader_epoch or partition.leader_id != state.leader \
                or partition.log is not tp_log:
            await self._stop_fetching([tp])
            partition.make_follower(state, tp_log)
            log.info("Follower %s-%d of leader %d at leader epoch %d", topic, state.partition_index,
                     state.leader, state.leader_epoch)
            await self._start_fetching(tp, partition)
        else:
            partition.make_follower(state, tp_log)  # same leader and epoch: keep fetching
        if self.log_manager.get_log(*tp, future=True) is not None:  # a move a restart interrupted
            await self._start_moving(tp, partition)
        self.complete_delayed_requests(tp)
        self._notify_leadership(topic, state.partition_index, state.leader == self.broker_id, state.leader_epoch)
        return Errors.NONE

    def _notify_leadership(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(topic, partition, is_leader, leader_epoch)
            except Exception:  # a listener's failure must not fail the controller's request
                log.exception("Leadership listener failed for %s-%d", topic, partition)

    async def stop_replicas(self, request: Any) -> Any:
        """StopReplica (v3+): stop serving, and delete the log when asked (one controller request at a time)."""
        async with self._state_change_lock:
            return await self._stop_replicas(request)

    async def _stop_replicas(self, request: Any) -> Any:
        errors = []
        # As Kafka's state-change log: which replicas a controller stopped is otherwise invisible.
        stopped = sorted((t.topic_name, p.partition_index, p.delete_partition)
                         for t in request.topic_states for p in t.partition_states)
        log.info("Handling StopReplica from controller %d (epoch %d) for %d partitions (topic, partition, delete): "
                 "%s%s", request.controller_id, request.controller_epoch, len(stopped), stopped[:STOP_REPLICA_LOGGED],
                 f" and {len(stopped) - STOP_REPLICA_LOGGED} more" if len(stopped) > STOP_REPLICA_LOGGED else "")
        for topic_state in request.topic_states:
            topic = topic_state.topic_name
            for state in topic_state.partition_states:
                tp = (topic, state.partition_index)
                error = await self._stop_replica(tp, state.leader_epoch, state.delete_partition)
                errors.append(StopReplicaResponse.StopReplicaPartitionError(
                    topic_name=topic, partition_index=state.partition_index, error_code=int(error)))
        return StopReplicaResponse(error_code=0, partition_errors=errors)

    async def _stop_replica(self, tp: TopicPartition, leader_epoch: int, delete: bool) -> Errors:
        partition = self.partitions.get(tp)
        if partition is not None and leader_epoch not in (EPOCH_DURING_DELETE, NO_EPOCH) \
                and leader_epoch < partition.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        await self._stop_fetching([tp])
        await self._stop_moving([tp])
        removed = self.partitions.pop(tp, None)
        if delete:
            self.offline_partitions.discard(tp)
        self.complete_delayed_requests(tp)
        if removed is not None:
            self._notify_leadership(tp[0], tp[1], False, leader_epoch)
        if delete:
            if not any(topic == tp[0] for topic, _ in self.partitions):
                self.topic_stats.remove(tp[0])
            try:
                await self.run_blocking(self.log_manager.delete_log, tp[0], tp[1])
                await self.run_blocking(self.log_manager.delete_log, tp[0], tp[1], True)
            except (OSError, StorageError) as exc:
                log.error("Cannot delete the log of %s-%d: %s", tp[0], tp[1], exc)
                return Errors.KAFKA_STORAGE_ERROR
            log.info("Deleted the log of %s-%d", tp[0], tp[1])
        return Errors.NONE

    # --- log dir failures ---------------------------------------------------------------------
    async def handle_log_dir_failure(self, log_dir: str) -> None:
        """Kafka's handleLogDirFailure: stop serving the replicas in a dir that failed and tell the
        controller, which moves their leadership; halt when no dir is left (the data on disk is
        left for recovery at the next start, as after a crash)."""
        offline, offline_futures = self.log_manager.handle_log_dir_failure(log_dir)
        if not self.log_manager.live_log_dirs:
            log.error("Shutdown broker because all log dirs in %s have failed", ", ".join(self.log_manager.log_dirs))
            logging.shutdown()
            os._exit(1)
        await self._stop_fetching(offline)
        await self._stop_moving(offline + offline_futures)
        for tp in offline:
            self.offline_partitions.add(tp)
            removed = self.partitions.pop(tp, None)
            self.complete_delayed_requests(tp)
            if removed is not None:
                self._notify_leadership(tp[0], tp[1], False, removed.leader_epoch)
        log.warning("Stopped serving replicas %s and moving replicas %s in failed dir %s", sorted(offline),
                    sorted(offline_futures), log_dir)
        if self.propagate_log_dir_event is not None:
            await self.propagate_log_dir_event()

    # --- moving replicas between log dirs -------------------------------------------------------
    async def alter_replica_log_dirs(self, dirs: dict[TopicPartition, str]) -> dict[TopicPartition, Errors]:
        """AlterReplicaLogDirs, as Kafka's ReplicaManager.alterReplicaLogDirs: move each hosted replica
        to its destination dir through a future log there (a move to another dir first cancels the
        one under way, a move back to the current dir just cancels it); for a replica not hosted yet,
        remember the dir it is to be created in and answer REPLICA_NOT_AVAILABLE."""
        results: dict[TopicPartition, Errors] = {}
        for tp, destination in dirs.items():
            try:
                await self._alter_replica_log_dir(tp, destination)
                results[tp] = Errors.NONE
            except (KafkaApiError, StorageError) as exc:
                error = error_of(exc) or Errors.UNKNOWN_SERVER_ERROR
                log.warning("Unable to alter log dirs for %s-%d: %s", *tp, exc)
                results[tp] = error
        return results

    async def _alter_replica_log_dir(self, tp: TopicPartition, destination: str) -> None:
        if len(suffixed_dir_name(*tp, FUTURE_DIR_SUFFIX)) > 255:
            raise KafkaApiError(Errors.INVALID_TOPIC_EXCEPTION, "The topic name is too long.")
        if not self.log_manager.is_log_dir_online(destination):
            raise KafkaStorageError(f"Log directory {destination} is offline")
        if tp in self.offline_partitions:
            raise KafkaStorageError(f"Partition {tp[0]}-{tp[1]} is offline")
        partition = self.partitions.get(tp)
        future = self.log_manager.get_log(*tp, future=True)
        if partition is not None and future is not None and parent_dir(future) != destination:
            await self._stop_moving([tp])  # the destination changed: this move is over
            await self.run_blocking(self.log_manager.delete_log, tp[0], tp[1], True)
        self.log_manager.maybe_update_preferred_log_dir(*tp, destination)
        if partition is None or partition.log is None:
            if self.metadata_cache.partition(*tp) is not None:
                raise KafkaApiError(Errors.REPLICA_NOT_AVAILABLE, f"{tp[0]}-{tp[1]} is not hosted here yet")
            raise KafkaApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        if self.log_manager.log_dir_of(*tp) == destination:
            log.info("Current log directory of %s-%d is the requested log dir %s: no future replica", *tp, destination)
            return
        if self.log_manager.get_log(*tp, future=True) is None:
            await self.run_blocking(self.log_manager.get_or_create_future_log, tp[0], tp[1], partition.topic_id)
            await self._start_moving(tp, partition)

    async def _start_moving(self, tp: TopicPartition, partition: Partition) -> None:
        if self.alter_log_dirs_manager is not None:
            await self.alter_log_dirs_manager.add_partitions({tp: partition})

    async def _stop_moving(self, tps: list[TopicPartition]) -> None:
        if self.alter_log_dirs_manager is not None:
            await self.alter_log_dirs_manager.remove_partitions(tps)

    # --- replication --------------------------------------------------------------------------
    def leader_endpoint(self, leader_id: int) -> tuple[str, int] | None:
        return self._leader_endpoints.get(leader_id) or \
            self.metadata_cache.broker_endpoint(leader_id, self.inter_broker_listener)

    async def _start_fetching(self, tp: TopicPartition, partition: Partition) -> None:
        if self.fetcher_manager is None or partition.leader_id < 0:
            return
        endpoint = self.leader_endpoint(partition.leader_id)
        if endpoint is None:
            log.warning("No endpoint known for broker %d, the leader of %s-%d", partition.leader_id, *tp)
            return
        await self.fetcher_manager.add_fetcher_for_partitions({tp: (partition, endpoint)})

    async def _stop_fetching(self, tps: list[TopicPartition]) -> None:
        if self.fetcher_manager is not None:
            await self.fetcher_manager.remove_fetcher_for_partitions(tps)

    def on_isr_changed(self, partition: Partition, previous_isr: list[int]) -> None:
        """The controller accepted an ISR change: the high watermark and waiting acks=all may move."""
        if len(partition.isr) > len(previous_isr):
            self.isr_expands += 1
        elif len(partition.isr) < len(previous_isr):
            self.isr_shrinks += 1
        partition.maybe_increment_high_watermark()
        self.complete_delayed_requests((partition.topic, partition.partition))

    def _maybe_expand_isr(self, partition: Partition, replica_id: int) -> None:
        """A caught-up follower joins the ISR only if it is a live broker here (Kafka's ZK-mode
        isReplicaIsrEligible): a broker the controller counts dead is not proposed."""
        if not self.metadata_cache.has_broker(replica_id):
            return
        new_isr = partition.isr_to_expand(replica_id)
        if new_isr is not None and self.alter_partition_manager is not None:
            self.alter_partition_manager.submit(partition, new_isr)

    def maybe_shrink_isr(self, lag_time_max_ms: int) -> None:
        """Propose dropping followers that have not caught up for ``replica.lag.time.max.ms``."""
        if self.alter_partition_manager is None:
            return
        current = now_ms()
        for partition in list(self.partitions.values()):
            new_isr = partition.isr_to_shrink(lag_time_max_ms, current)
            if new_isr is not None:
                log.info("Shrinking ISR of %s-%d from %s to %s: followers out of sync for %d ms",
                         partition.topic, partition.partition, partition.isr, new_isr, lag_time_max_ms)
                self.alter_partition_manager.submit(partition, new_isr)

    async def run_isr_expiration(self, lag_time_max_ms: int) -> None:
        """Kafka's isr-expiration task: check every half lag period."""
        while True:
            await asyncio.sleep(lag_time_max_ms / 2000)
            try:
                self.maybe_shrink_isr(lag_time_max_ms)
            except Exception:  # noqa: BLE001 - the task must outlive one bad check, as Kafka's scheduler does
                log.exception("Uncaught exception in scheduled task 'isr-expiration'")

    def complete_delayed_requests(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # --- produce ----------------------------------------------------------------------------
    def maybe_start_transaction_verification(self, topic: str, partition_index: int, producer_id: int,
                                             sequence: int, epoch: int) -> VerificationGuard:
        """KIP-890: the guard a transactional append must carry (SENTINEL: its transaction is already open)."""
        log = self.leader_partition(topic, partition_index).leader_log()
        return log.maybe_start_transaction_verification(producer_id, sequence, epoch)

    def start_transaction_verification(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                       partitions: dict[TopicPartition, int]
                                       ) -> tuple[dict[TopicPartition, Errors], dict[TopicPartition, VerificationGuard]]:
        """KIP-890, before a transactional append: (errors, guards) for these partitions, each mapped to
        the base sequence of its transactional batch. The guarded partitions still need the
        coordinator's answer (``verify_transaction``); partitions whose transaction is already open
        here need neither; with verification off or no transactional id there is nothing to do."""
        errors: dict[TopicPartition, Errors] = {}
        guards: dict[TopicPartition, VerificationGuard] = {}
        if transactional_id is None or self.add_partitions_to_txn_manager is None or \
                not self.log_manager.producer_state_config.transaction_verification_enabled:
            return errors, guards
        for tp, sequence in partitions.items():
            try:
                guard = self.maybe_start_transaction_verification(tp[0], tp[1], producer_id, sequence, producer_epoch)
            except KafkaApiError as exc:
                errors[tp] = exc.error
                continue
            if guard is not SENTINEL_GUARD:
                guards[tp] = guard
        return errors, guards

    async def verify_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                 partitions: dict[TopicPartition, int], operation: TransactionSupportedOperation
                                 ) -> tuple[dict[TopicPartition, Errors], dict[TopicPartition, VerificationGuard]]:
        """``start_transaction_verification``, then the coordinator's answer for the guarded partitions
        (Kafka's maybeStartTransactionVerificationForPartitions): the errors include its refusals."""
        errors, guards = self.start_transaction_verification(transactional_id, producer_id, producer_epoch, partitions)
        if guards:
            assert transactional_id is not None and self.add_partitions_to_txn_manager is not None
            errors.update(await self.add_partitions_to_txn_manager.verify_transaction(
                transactional_id, producer_id, producer_epoch, list(guards), operation))
        return errors, guards

    async def append_to_leader(self, topic: str, partition_index: int, records: bytearray,
                               required_acks: int, origin: AppendOrigin = AppendOrigin.CLIENT,
                               verification_guard: VerificationGuard = SENTINEL_GUARD) -> LogAppendInfo:
        """Append one partition's batches as leader (see ``append_to_partition``)."""
        return await self.append_to_partition(self.leader_partition(topic, partition_index), records,
                                              required_acks, origin, verification_guard)

    async def append_to_partition(self, partition: Partition, records: bytearray, required_acks: int,
                                  origin: AppendOrigin = AppendOrigin.CLIENT,
                                  verification_guard: VerificationGuard = SENTINEL_GUARD,
                                  parsed: Batches | None = None) -> LogAppendInfo:
        """Append batches to a partition ``leader_partition`` just gave, as its leader.

        Callers hand over batches whose CRCs are checked or freshly computed (the produce
        handler's ``validate_records``, the coordinators' builders), so the log skips its
        second CRC pass; ``parsed`` is what the produce handler's check parsed (see
        ``Log.append_as_leader``).
        """
        tp_log = partition.leader_log()
        info = self.try_append_to_partition(partition, tp_log, records, required_acks, origin, verification_guard,
                                            parsed)
        if info is None:
            info = await self.append_to_partition_blocking(partition, tp_log, records, origin, verification_guard,
                                                           parsed)
        return info

    def try_append_to_partition(self, partition: Partition, tp_log: Log, records: bytearray, required_acks: int,
                                origin: AppendOrigin, verification_guard: VerificationGuard,
                                parsed: Batches | None) -> LogAppendInfo | None:
        """``append_to_partition`` on the event loop, None when the append must block (a roll or
        an fsync due, the log's lock busy): then ``append_to_partition_blocking`` does it.

        A page-cache write takes microseconds: a thread hop would cost more, and the GIL handed
        back and forth between the loop and a pool thread stalls the loop (py-spy: half its time
        in sendmsg waiting for the GIL at 10,000 produce requests/s)."""
        if required_acks == -1:
            partition.check_min_isr(required_acks)
        info = tp_log.try_append_as_leader(records, partition.leader_epoch, origin, validated=True, parsed=parsed,
                                           verification_guard=verification_guard)
        if info is not None:
            self._appended(partition, len(records), info)
        return info

    async def append_to_partition_blocking(self, partition: Partition, tp_log: Log, records: bytearray,
                                           origin: AppendOrigin, verification_guard: VerificationGuard,
                                           parsed: Batches | None) -> LogAppendInfo:
        """The append ``try_append_to_partition`` declined, in the I/O pool."""
        info = await self.run_blocking(functools.partial(
            tp_log.append_as_leader, records, partition.leader_epoch, origin, validated=True, parsed=parsed,
            verification_guard=verification_guard))
        self._appended(partition, len(records), info)
        return info

    def _appended(self, partition: Partition, size: int, info: LogAppendInfo) -> None:
        topic = partition.topic
        self.topic_stats.mark_appended(topic, size, info.num_records)
        partition.maybe_increment_high_watermark()
        # Appends move the log end (replica fetches) and, with an ISR of one, the HW (consumers).
        self.complete_delayed_requests((topic, partition.partition))

    async def append_and_wait(self, topic: str, partition_index: int, records: bytearray, timeout_ms: int,
                              origin: AppendOrigin = AppendOrigin.COORDINATOR,
                              verification_guard: VerificationGuard = SENTINEL_GUARD) -> LogAppendInfo:
        """Append as leader with acks=all and wait until the ISR has it (coordinators' writes).

        Raises ``KafkaApiError`` with Kafka's error: NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
        NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...; storage errors as ``StorageError``.
        """
        self.topic_stats.mark_produce(topic)
        info = await self.append_to_leader(topic, partition_index, records, -1, origin, verification_guard)
        entry = ProduceResponse.PartitionProduceResponse(index=partition_index, error_code=0,
                                                         base_offset=info.first_offset)
        done = asyncio.get_running_loop().create_future()
        operation = DelayedProduce(timeout_ms, self, {(topic, partition_index): (info.last_offset + 1, entry)},
                                   lambda: done.done() or done.set_result(None))
        self.produce_purgatory.try_complete_else_watch(operation, [(topic, partition_index)])
        await done
        if entry.error_code:
            raise KafkaApiError(Errors(entry.error_code))
        return info

    # --- fetch ------------------------------------------------------------------------------
    def read_from_local_log(self, specs: dict[TopicPartition, FetchPartitionSpec], replica_id: int,
                            isolation: FetchIsolation, max_bytes: int,
                            min_one_message: bool = True) -> dict[TopicPartition, PartitionReadResult]:
        """Read every partition in order; the first batch found is returned whole even above the limits."""
        results: dict[TopicPartition, PartitionReadResult] = {}
        remaining = max_bytes
        for tp, spec in specs.items():
            result = results[tp] = self._read_partition(tp, spec, replica_id, isolation,
                                                       min(spec.max_bytes, max(remaining, 0)), min_one_message)
            size = len(result.records)
            if size:
                min_one_message = False
                remaining -= size
        return results

    def _read_partition(self, tp: TopicPartition, spec: FetchPartitionSpec, replica_id: int,
                        isolation: FetchIsolation, max_bytes: int, min_one_message: bool) -> PartitionReadResult:
        try:
            partition = self.leader_partition(*tp)
            partition.check_leader_epoch(spec.current_leader_epoch)
            tp_log = partition.leader_log()
            if replica_id >= 0:
                partition.check_follower(replica_id)
            if spec.last_fetched_epoch != NO_EPOCH:
                diverging = partition.diverging_epoch(spec.last_fetched_epoch, spec.fetch_offset)
                if diverging is not None:  # no data and no fetch state: the fetcher truncates first
                    return PartitionReadResult(high_watermark=tp_log.high_watermark,
                                               last_stable_offset=tp_log.last_stable_offset,
                                               log_start_offset=tp_log.log_start_offset, diverging_epoch=diverging)
            if replica_id >= 0:
                if partition.update_follower_fetch_state(replica_id, spec.fetch_offset):
                    # The HW moved: acks=all produces and consumer long polls may complete. Deferred, as
                    # this read may itself run inside a delayed fetch's completion check.
                    asyncio.get_running_loop().call_soon(self.complete_delayed_requests, tp)
                self._maybe_expand_isr(partition, replica_id)
        except KafkaApiError as exc:
            return PartitionReadResult(error=exc.error)
        result = PartitionReadResult(high_watermark=tp_log.high_watermark,
                                     last_stable_offset=tp_log.last_stable_offset,
                                     log_start_offset=tp_log.log_start_offset)
        quota = self.leader_quota
        throttled = quota is not None and replica_id >= 0 and replica_id not in partition.isr \
            and quota.is_throttled(tp)
        if throttled and quota is not None and quota.is_quota_exceeded():
            return result  # an out-of-sync replica of a throttled partition waits for the quota
        try:
            info = tp_log.read(spec.fetch_offset, max_bytes, isolation, min_one_message)
        except (KafkaApiError, StorageError) as exc:
            result.error = error_of(exc) or Errors.UNKNOWN_SERVER_ERROR
            return result
        if len(info.records):
            result.records = info.records
            if throttled and quota is not None:
                quota.record(len(info.records))
        result.aborted_transactions = info.aborted_transactions
        return result

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
