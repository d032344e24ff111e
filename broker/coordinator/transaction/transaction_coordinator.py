"""TransactionCoordinator: the transaction APIs over the state machine (Kafka 3.9's TransactionCoordinator).

InitProducerId (epoch bumps, producer id rotation at an exhausted epoch, fencing an ongoing
transaction by aborting it, KIP-360 recovery with a given producer id and epoch), AddPartitions
(and its verify-only form for partition leaders, KIP-890 part 1), EndTxn, DescribeTransactions and
ListTransactions, with the errors Kafka returns where it returns them. 3.9 in ZooKeeper mode has no
transaction version 2, so EndTxn never bumps the epoch. Background: transactions older than their
timeout are aborted with a bumped epoch (the old producer is fenced), idle transactional ids expire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple

from broker.security.client_security import PLAINTEXT, ClientSecurity
from broker.coordinator.transaction.transaction_marker_channel_manager import (
    MarkerSender,
    TransactionMarkerChannelManager,
)
from broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransactionStateError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from broker.coordinator.transaction.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC,
    CoordinatorEpochAndTxnMetadata,
    TransactionConfig,
    TransactionListing,
    TransactionStateManager,
    now_ms,
)
from protocol.errors import Errors, KafkaApiError

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

S = TransactionState
# How long AddPartitionsToTxn may wait for the previous transaction to complete before answering
# CONCURRENT_TRANSACTIONS as Kafka does at once (see _wait_for_completion).
COMPLETION_HOLD_S = 0.05
COMPLETION_POLL_S = 0.001
# A new producer id; raises KafkaApiError when none can be had (e.g. the ids are exhausted).
GenerateProducerId = Callable[[], Awaitable[int]]


class InitProducerIdResult(NamedTuple):
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionDescription(NamedTuple):
    error: Errors
    metadata: TransactionMetadata | None = None


def _invalid_transition(transactional_id: str, state: TransactionState, commit: bool) -> Errors:
    log.warning("TransactionalId: %s's state is %s, but received transaction marker result to send: %s",
                transactional_id, state.state_name, "COMMIT" if commit else "ABORT")
    return Errors.INVALID_TXN_STATE


def _illegal_state(transactional_id: str, state: TransactionState) -> IllegalTransactionStateError:
    return IllegalTransactionStateError(f"Found transactionalId {transactional_id} with state {state.state_name}. "
                                        "This is illegal as we should never have transitioned to this state.")


class TransactionCoordinator:
    def __init__(self, broker_id: int, config: TransactionConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, run_blocking: Callable[..., Awaitable[Any]],
                 generate_producer_id: GenerateProducerId, listener_name: str,
                 marker_sender: MarkerSender | None = None, security: ClientSecurity = PLAINTEXT) -> None:
        """``marker_sender`` replaces the network between the marker channel and partition leaders (unit tests)."""
        self.config = config
        self.state_manager = TransactionStateManager(broker_id, config, replica_manager, metadata_cache, run_blocking)
        self.marker_channel = TransactionMarkerChannelManager(
            broker_id, self.state_manager, metadata_cache, listener_name, config.request_timeout_ms,
            sender=marker_sender, security=security)
        self.generate_producer_id = generate_producer_id
        self.active = False
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle ------------------------------------------------------------------------------------
    def startup(self, enable_transactional_id_expiration: bool = True) -> None:
        log.info("Starting up.")
        self._spawn(self._every(self.config.abort_timed_out_transactions_interval_ms, self.abort_timed_out_transactions))
        if enable_transactional_id_expiration:
            self._spawn(self._every(self.config.remove_expired_transactional_ids_interval_ms,
                                    self.state_manager.remove_expired_transactional_ids))
        self.marker_channel.start()
        self.active = True
        log.info("Startup complete.")

    async def shutdown(self) -> None:
        log.info("Shutting down.")
        self.active = False
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.state_manager.shutdown()
        await self.marker_channel.shutdown()
        log.info("Shutdown complete.")

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _every(interval_ms: int, action: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception:  # a failed round must not stop the schedule
                log.exception("Scheduled transaction coordinator task failed")

    def partition_for(self, transactional_id: str) -> int:
        return self.state_manager.partition_for(transactional_id)

    # --- leadership of __transaction_state partitions ------------------------------------------------------
    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """ReplicaManager leadership listener: elected (load) or resigned (unload) for a partition."""
        if topic != TRANSACTION_STATE_TOPIC or not self.active:
            return
        if is_leader:
            if self.state_manager.loading_partitions.get(partition) == leader_epoch:
                return
            entry = self.state_manager.transaction_metadata_cache.get(partition)
            if entry is not None and entry.coordinator_epoch == leader_epoch:
                return
            self.on_election(partition, leader_epoch)
        elif self.state_manager.owns_loaded_or_loading(partition):
            self.on_resignation(partition, leader_epoch if leader_epoch >= 0 else None)

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        log.info("Elected as the txn coordinator for partition %d at epoch %d", partition, coordinator_epoch)
        # Whatever an earlier term of this partition left queued is obsolete: the load resends what is unfinished.
        self.marker_channel.remove_markers_for_txn_partition(partition)
        self.state_manager.loading_partitions[partition] = coordinator_epoch
        self._spawn(self.state_manager.load_transactions_for_partition(
            partition, coordinator_epoch, self.marker_channel.add_txn_markers_to_send))

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        log.info("Resigned as the txn coordinator for partition %d at epoch %s", partition, coordinator_epoch)
        self.state_manager.remove_transactions_for_partition(partition, coordinator_epoch)
        self.marker_channel.remove_markers_for_txn_partition(partition)

    # --- InitProducerId --------------------------------------------------------------------------------------
    async def handle_init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                                      expected: tuple[int, int] | None) -> InitProducerIdResult:
        """``expected`` is the (producer id, epoch) a recovering producer (KIP-360) still has, if any."""
        if transactional_id == "":  # as the producer client itself refuses it
            return InitProducerIdResult(Errors.INVALID_REQUEST)
        if transactional_id is not None and not self.state_manager.validate_transaction_timeout_ms(
                transaction_timeout_ms):
            return InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT)
        try:
            if transactional_id is None:  # idempotent producer: any broker hands out an id
                return InitProducerIdResult(Errors.NONE, await self.generate_producer_id(), 0)
            found = self.state_manager.get_transaction_state(transactional_id)
            if found is None:
                producer_id = await self.generate_producer_id()
                found = self.state_manager.put_transaction_state_if_not_exists(TransactionMetadata(
                    transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                    transaction_timeout_ms, S.EMPTY, txn_last_update_timestamp=now_ms()))
            coordinator_epoch, transit = await self._prepare_init_producer_id_transit(
                transactional_id, transaction_timeout_ms, found, expected)
        except KafkaApiError as exc:
            return InitProducerIdResult(exc.error)
        if transit.txn_state is S.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction under a bumped epoch, and let the client retry until it is done.
            error = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                commit=False, is_from_client=False)
            return InitProducerIdResult(error if error is not Errors.NONE else Errors.CONCURRENT_TRANSACTIONS)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error is not Errors.NONE:
            log.info("Returning %s error code to client for %s's InitProducerId request", error.name,
                     transactional_id)
            return InitProducerIdResult(error)
        log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition %s-%d",
                 transactional_id, transit.producer_id, transit.producer_epoch, TRANSACTION_STATE_TOPIC,
                 self.partition_for(transactional_id))
        return InitProducerIdResult(Errors.NONE, transit.producer_id, transit.producer_epoch)

    async def _prepare_init_producer_id_transit(self, transactional_id: str, transaction_timeout_ms: int,
                                                found: CoordinatorEpochAndTxnMetadata,
                                                expected: tuple[int, int] | None) -> tuple[int, TxnTransitMetadata]:
        """Kafka's prepareInitProducerIdTransit: (coordinator epoch, the transition), or KafkaApiError with the
        error to answer.

        A producer id rotation needs a new id, which may come from ZooKeeper (off the loop): the checks
        are made again once it is there, so nothing can slip in between them and the prepared transition.
        """
        new_producer_id: int | None = None
        while True:
            metadata = found.transaction_metadata
            if metadata.pending_transition_in_progress:
                raise KafkaApiError(Errors.CONCURRENT_TRANSACTIONS)  # retriable: the client backs off
            if expected is not None and not self._is_valid_producer_id(metadata, *expected):
                raise KafkaApiError(Errors.PRODUCER_FENCED)
            state = metadata.state
            if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
                raise KafkaApiError(Errors.CONCURRENT_TRANSACTIONS)
            if state is S.ONGOING:
                # This epoch is never returned: the abort that follows makes the client retry, and the retry
                # bumps again (with a new producer id if the fence exhausted the epochs).
                return found.coordinator_epoch, metadata.prepare_fence_producer_epoch()
            if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
                raise _illegal_state(transactional_id, state)
            if not (metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch)):
                return found.coordinator_epoch, metadata.prepare_increment_producer_epoch(
                    transaction_timeout_ms, None if expected is None else expected[1], now_ms())
            if new_producer_id is not None:
                return found.coordinator_epoch, metadata.prepare_producer_id_rotation(
                    new_producer_id, transaction_timeout_ms, now_ms(), expected is not None)
            new_producer_id = await self.generate_producer_id()
            refreshed = self.state_manager.get_transaction_state(transactional_id)
            if refreshed is None:
                raise KafkaApiError(Errors.CONCURRENT_TRANSACTIONS)  # expired meanwhile: the retry starts over
            found = refreshed

    @staticmethod
    def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
        """A recovering producer is not fenced when the id was just created, its id is current, or it retries
        a bump that rotated the id after its epoch ran out."""
        return metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id or \
            (producer_id == metadata.last_producer_id and is_epoch_exhausted(producer_epoch))

    def _transaction_of(self, transactional_id: str | None, producer_id: int,
                        producer_epoch: int | None = None) -> CoordinatorEpochAndTxnMetadata:
        """The transaction a producer's request is about, or KafkaApiError: INVALID_REQUEST without an id, the
        coordinator's own errors, INVALID_PRODUCER_ID_MAPPING when the id is unknown or has another producer,
        PRODUCER_FENCED when ``producer_epoch`` is given and is not the current one."""
        if not transactional_id:
            raise KafkaApiError(Errors.INVALID_REQUEST)
        found = self.state_manager.get_transaction_state(transactional_id)
        if found is None or found.transaction_metadata.producer_id != producer_id:
            raise KafkaApiError(Errors.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch is not None and found.transaction_metadata.producer_epoch != producer_epoch:
            raise KafkaApiError(Errors.PRODUCER_FENCED)
        return found

    # --- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------------------
    async def handle_add_partitions_to_transaction(self, transactional_id: str | None, producer_id: int,
                                                   producer_epoch: int, partitions: set[TopicPartition]) -> Errors:
        try:
            found = self._transaction_of(transactional_id, producer_id, producer_epoch)
            metadata = found.transaction_metadata
            if _completing(metadata):
                await _wait_for_completion(metadata)
                # the coordinator may have moved, or the producer been fenced, meanwhile
                found = self._transaction_of(transactional_id, producer_id, producer_epoch)
                metadata = found.transaction_metadata
        except KafkaApiError as exc:
            return exc.error
        if _completing(metadata):
            return Errors.CONCURRENT_TRANSACTIONS
        if metadata.state is S.ONGOING and partitions <= metadata.topic_partitions:
            return Errors.NONE  # already in the transaction: nothing to write
        transit = metadata.prepare_add_partitions(frozenset(partitions), now_ms())
        return await self.state_manager.append_transaction_to_log(transactional_id, found.coordinator_epoch, transit)

    def handle_verify_partitions_in_transaction(self, transactional_id: str | None, producer_id: int,
                                                producer_epoch: int, partitions: set[TopicPartition]
                                                ) -> dict[TopicPartition, Errors]:
        """KIP-890 part 1, asked by a partition leader before it accepts a transactional produce: is each
        partition in the transaction? Pending transitions are not checked (the append is the final check)."""
        try:
            metadata = self._transaction_of(transactional_id, producer_id, producer_epoch).transaction_metadata
        except KafkaApiError as exc:
            return dict.fromkeys(partitions, exc.error)
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(partitions, Errors.CONCURRENT_TRANSACTIONS)
        return {tp: Errors.NONE if tp in metadata.topic_partitions else Errors.TRANSACTION_ABORTABLE
                for tp in partitions}

    # --- EndTxn -------------------------------------------------------------------------------------------------
    async def handle_end_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                     commit: bool) -> Errors:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit, is_from_client=True)

    async def _end_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                               commit: bool, is_from_client: bool) -> Errors:
        """Write PrepareCommit/PrepareAbort, answer, then have the markers written (transaction version 1)."""
        is_epoch_fence = False
        try:
            found = self._transaction_of(transactional_id, producer_id)
        except KafkaApiError as exc:
            return exc.error
        metadata, coordinator_epoch = found.transaction_metadata, found.coordinator_epoch
        # A client must use the current epoch; the coordinator's own aborts come with the bumped one.
        if (is_from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return Errors.PRODUCER_FENCED
        if metadata.pending_transition_in_progress and metadata.pending_state is not S.PREPARE_EPOCH_FENCE:
            return Errors.CONCURRENT_TRANSACTIONS
        state = metadata.state
        if state is S.ONGOING:
            if not commit and metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                # The fence becomes this abort: clear it and take the bumped epoch into the metadata written.
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms())
        elif state is S.COMPLETE_COMMIT:
            return Errors.NONE if commit else _invalid_transition(transactional_id, state, commit)
        elif state is S.COMPLETE_ABORT:
            return Errors.NONE if not commit else _invalid_transition(transactional_id, state, commit)
        elif state is S.PREPARE_COMMIT:
            return Errors.CONCURRENT_TRANSACTIONS if commit else _invalid_transition(transactional_id, state, commit)
        elif state is S.PREPARE_ABORT:
            return Errors.CONCURRENT_TRANSACTIONS if not commit else _invalid_transition(transactional_id, state, commit)
        elif state is S.EMPTY:
            return _invalid_transition(transactional_id, state, commit)
        else:
            raise _illegal_state(transactional_id, state)

        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error is not Errors.NONE:
            log.info("Aborting sending of transaction markers and returning %s error to client for %s's EndTransaction "
                     "request of %s, since appending %s to transaction log with coordinator epoch %d failed",
                     error.name, transactional_id, "COMMIT" if commit else "ABORT", transit, coordinator_epoch)
            if is_epoch_fence:
                self._mark_failed_epoch_fence(transactional_id, coordinator_epoch, error, transit)
            return error
        return self._send_markers_after_prepare(transactional_id, producer_id, producer_epoch, commit,
                                                coordinator_epoch)

    def _send_markers_after_prepare(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                                    coordinator_epoch: int) -> Errors:
        try:
            found = self.state_manager.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            return exc.error
        if found is None:
            raise IllegalTransactionStateError(f"The coordinator still owns the transaction partition for "
                                               f"{transactional_id}, but there is no metadata in the cache")
        if found.coordinator_epoch != coordinator_epoch:
            return Errors.NOT_COORDINATOR
        metadata = found.transaction_metadata
        if metadata.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return Errors.CONCURRENT_TRANSACTIONS
        state = metadata.state
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise _illegal_state(transactional_id, state)
        if state is not (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            return _invalid_transition(transactional_id, state, commit)
        # Answer now; the markers and the completion follow in the background.
        self.marker_channel.add_txn_markers_to_send(coordinator_epoch, commit, metadata,
                                                    metadata.prepare_complete(now_ms()))
        return Errors.NONE

    def _mark_failed_epoch_fence(self, transactional_id: str, coordinator_epoch: int, error: Errors,
                                 transit: TxnTransitMetadata) -> None:
        try:
            found = self.state_manager.get_transaction_state(transactional_id)
        except KafkaApiError:
            return
        if found is not None and found.coordinator_epoch == coordinator_epoch:
            found.transaction_metadata.has_failed_epoch_fence = True
            log.warning("The coordinator failed to write an epoch fence transition for producer %s to the transaction "
                        "log with error %s. The epoch was increased to %d but not returned to the client",
                        transactional_id, error.name, transit.producer_epoch)

    # --- timeouts ----------------------------------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> None:
        """Abort, with a bumped epoch, every transaction open longer than its timeout."""
        for transactional_id, producer_id, _epoch in self.state_manager.timed_out_transactions():
            try:
                found = self.state_manager.get_transaction_state(transactional_id)
            except KafkaApiError:
                continue
            if found is None:
                log.error("Could not find transaction metadata when trying to timeout transaction for %s",
                          transactional_id)
                continue
            metadata = found.transaction_metadata
            if metadata.producer_id != producer_id:
                log.error("Found incorrect producerId when expiring transactionalId: %s. Expected producerId: %d. "
                          "Found producerId: %d", transactional_id, producer_id, metadata.producer_id)
                continue
            if metadata.pending_transition_in_progress:
                log.debug("Skipping abort of timed out transaction %s since there is a pending state transition",
                          transactional_id)
                continue
            transit = metadata.prepare_fence_producer_epoch()
            self._spawn(self._abort_timed_out(transactional_id, transit))

    async def _abort_timed_out(self, transactional_id: str, transit: TxnTransitMetadata) -> None:
        error = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                            commit=False, is_from_client=False)
        if error is Errors.NONE:
            log.info("Completed rollback of ongoing transaction for transactionalId %s due to timeout",
                     transactional_id)
        elif error in (Errors.INVALID_PRODUCER_ID_MAPPING, Errors.PRODUCER_FENCED, Errors.CONCURRENT_TRANSACTIONS):
            log.debug("Rollback of ongoing transaction for transactionalId %s has been cancelled due to error %s",
                      transactional_id, error.name)
        else:
            log.warning("Rollback of ongoing transaction for transactionalId %s failed due to error %s",
                        transactional_id, error.name)

    # --- admin --------------------------------------------------------------------------------------------------
    def handle_describe_transactions(self, transactional_id: str) -> TransactionDescription:
        if not self.active:
            return TransactionDescription(Errors.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return TransactionDescription(Errors.INVALID_REQUEST)
        try:
            found = self.state_manager.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            return TransactionDescription(exc.error)
        if found is None or found.transaction_metadata.state is S.DEAD:  # Dead: being expired
            return TransactionDescription(Errors.TRANSACTIONAL_ID_NOT_FOUND)
        return TransactionDescription(Errors.NONE, found.transaction_metadata)

    def handle_list_transactions(self, producer_ids: set[int], states: set[str], duration_ms: int = -1
                                 ) -> tuple[Errors, list[str], list[TransactionListing]]:
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, [], []
        return self.state_manager.list_transaction_states(producer_ids, states, duration_ms)


def _completing(metadata: TransactionMetadata) -> bool:
    """A transition is being written, or the markers of a commit or abort are."""
    return metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)


async def _wait_for_completion(metadata: TransactionMetadata) -> None:
    """Wait up to COMPLETION_HOLD_S for the previous transaction to complete. librdkafka and the Java
    producer send the next transaction's AddPartitionsToTxn right after EndTxn's answer, while the
    markers are being written; Kafka answers CONCURRENT_TRANSACTIONS and the client backs off 20 ms,
    longer than the markers take here, so transactions of a thousand records lost most of their
    throughput to that pause. A short wait answers the same request once the markers are written."""
    deadline = asyncio.get_running_loop().time() + COMPLETION_HOLD_S
    while _completing(metadata) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(COMPLETION_POLL_S)
