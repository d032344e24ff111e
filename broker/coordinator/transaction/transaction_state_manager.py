"""TransactionStateManager: the transactional ids of the ``__transaction_state`` partitions this broker leads.

A transactional id lives in partition ``abs(javaHashCode(id)) % partitions``. Becoming leader of
a partition loads its ids by replaying the log (COORDINATOR_LOAD_IN_PROGRESS meanwhile), with the
partition's leader epoch as the coordinator epoch; transactions found half-completed (Prepare*)
are handed back to have their markers written again. Losing the partition unloads them
(NOT_COORDINATOR). Every state change is appended with acks=all before it is applied
(``append_transaction_to_log``); append errors become the coordinator errors Kafka maps them to.
Everything runs on the broker's event loop, so Kafka's locks have no counterpart here; a
transition in flight is guarded by the metadata's pending state instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from broker.coordinator.internal_topic import InternalTopicPartitions, replay_partition_log
from broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol import transaction_log_records as records
from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import ProtocolError
from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.errors import StorageError

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
S = TransactionState
RunBlocking = Callable[..., Awaitable[Any]]
# Called for each transaction a load finds in PrepareCommit/PrepareAbort: (coordinator epoch, commit?,
# metadata, its prepared completion).
SendTxnMarkers = Callable[[int, bool, TransactionMetadata, TxnTransitMetadata], None]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TransactionConfig:
    """The broker's transaction.* and transactional.id.* settings (Kafka's TransactionConfig)."""

    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_max_timeout_ms: int = 900000
    transaction_log_num_partitions: int = 50
    transaction_log_load_buffer_size: int = 5 * 1024 * 1024
    abort_timed_out_transactions_interval_ms: int = 10000
    remove_expired_transactional_ids_interval_ms: int = 3600 * 1000
    request_timeout_ms: int = 30000

    @classmethod
    def from_broker_config(cls, config: Any) -> TransactionConfig:
        return cls(
            transactional_id_expiration_ms=config.get("transactional.id.expiration.ms"),
            transaction_max_timeout_ms=config.get("transaction.max.timeout.ms"),
            transaction_log_num_partitions=config.get("transaction.state.log.num.partitions"),
            transaction_log_load_buffer_size=config.get("transaction.state.log.load.buffer.size"),
            abort_timed_out_transactions_interval_ms=config.get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transactional_ids_interval_ms=config.get(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
            request_timeout_ms=config.get("request.timeout.ms"),
        )


class CoordinatorEpochAndTxnMetadata(NamedTuple):
    coordinator_epoch: int
    transaction_metadata: TransactionMetadata


@dataclass
class TxnMetadataCacheEntry:
    """The loaded ids of one partition, at the coordinator epoch they were loaded with."""

    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: TransactionState


def append_error(error: Errors) -> Errors:
    """A failed ``__transaction_state`` append as the coordinator reports it."""
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 Errors.REQUEST_TIMED_OUT):
        return Errors.COORDINATOR_NOT_AVAILABLE  # retriable for the client
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


# --- record <-> state ------------------------------------------------------------------------------

def log_value(transit: TxnTransitMetadata) -> records.TransactionLogValue:
    """Value version 0, as a 3.9 broker writes it: an Empty transaction has null partitions."""
    if transit.txn_state is S.EMPTY and transit.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {transit}")
    partitions = None
    if transit.txn_state is not S.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [records.PartitionsSchema(topic, ids) for topic, ids in by_topic.items()]
    return records.TransactionLogValue(
        producer_id=transit.producer_id, producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms, transaction_status=int(transit.txn_state),
        transaction_partitions=partitions, transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp)


def metadata_from_value(transactional_id: str, value: records.TransactionLogValue) -> TransactionMetadata:
    """A loaded transaction: the log keeps neither the last producer id nor the last epoch."""
    try:
        state = TransactionState(value.transaction_status)
    except ValueError:
        raise ProtocolError(f"Unknown transaction state id {value.transaction_status} in the log of "
                            f"{transactional_id}") from None
    partitions = set()
    if state is not S.EMPTY:
        partitions = {(p.topic, pid) for p in value.transaction_partitions or () for pid in p.partition_ids}
    return TransactionMetadata(transactional_id, value.producer_id, NO_PRODUCER_ID, value.producer_epoch,
                               NO_PRODUCER_EPOCH, value.transaction_timeout_ms, state, partitions,
                               value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms)


def read_transactions(tp_log: Any, buffer_size: int) -> dict[str, TransactionMetadata]:
    """Blocking: the latest state of every transactional id in a partition's log (tombstones drop it)."""
    loaded: dict[str, TransactionMetadata] = {}

    def apply(buf: bytes) -> None:
        for pos, header in iter_log_entries(buf):
            if header.is_control:
                continue
            for record in decode_entry_records(buf, pos):
                if record.key is None:
                    raise ProtocolError("Transaction state log's key should not be null")
                key = records.decode_key(bytes(record.key))
                if key is None:
                    log.warning("Unknown message key while loading transaction state; ignoring it")
                    continue
                if record.value is None:
                    loaded.pop(key.transactional_id, None)
                else:
                    value = records.decode_value(bytes(record.value))
                    loaded[key.transactional_id] = metadata_from_value(key.transactional_id, value)

    replay_partition_log(tp_log, buffer_size, apply)
    return loaded


class TransactionStateManager:
    def __init__(self, broker_id: int, config: TransactionConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, run_blocking: RunBlocking) -> None:
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.run_blocking = run_blocking
        self.loading_partitions: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self.transaction_metadata_cache: dict[int, TxnMetadataCacheEntry] = {}
        self._partitions = InternalTopicPartitions(TRANSACTION_STATE_TOPIC, metadata_cache,
                                                   config.transaction_log_num_partitions)
        self.shutting_down = False

    def partition_for(self, transactional_id: str) -> int:
        return self._partitions.partition_for(transactional_id)

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    # --- the cache ----------------------------------------------------------------------------------
    def get_transaction_state(self, transactional_id: str) -> CoordinatorEpochAndTxnMetadata | None:
        """The id's metadata, None if unknown; raises KafkaApiError when this broker cannot answer for it."""
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata) -> CoordinatorEpochAndTxnMetadata:
        found = self._get_and_maybe_add(metadata.transactional_id, metadata)
        assert found is not None
        return found

    def _get_and_maybe_add(self, transactional_id: str,
                           created: TransactionMetadata | None) -> CoordinatorEpochAndTxnMetadata | None:
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            raise KafkaApiError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        entry = self.transaction_metadata_cache.get(partition)
        if entry is None:
            raise KafkaApiError(Errors.NOT_COORDINATOR)
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        if metadata is None and created is not None:
            metadata = entry.metadata_per_transactional_id.setdefault(transactional_id, created)
        return None if metadata is None else CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of Ongoing transactions open longer than their timeout."""
        current = now_ms()
        return [(txn_id, m.producer_id, m.producer_epoch)
                for entry in self.transaction_metadata_cache.values()
                for txn_id, m in entry.metadata_per_transactional_id.items()
                if not m.pending_transition_in_progress and m.state is S.ONGOING
                and m.txn_start_timestamp + m.txn_timeout_ms < current]

    def list_transaction_states(self, producer_ids: set[int], state_names: set[str], duration_ms: int = -1
                                ) -> tuple[Errors, list[str], list[TransactionListing]]:
        """ListTransactions: (error, unknown state filters, matching transactions)."""
        if self.loading_partitions:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, [], []
        states = {TransactionState.from_name(name) for name in state_names} - {None}
        unknown = sorted(name for name in state_names if TransactionState.from_name(name) is None)
        current = now_ms()

        def include(m: TransactionMetadata) -> bool:
            if m.state is S.DEAD:  # being expired
                return False
            if producer_ids and m.producer_id not in producer_ids:
                return False
            if state_names and m.state not in states:
                return False
            return duration_ms < 0 or current - m.txn_start_timestamp > duration_ms

        listed = [TransactionListing(m.transactional_id, m.producer_id, m.state)
                  for entry in self.transaction_metadata_cache.values()
                  for m in entry.metadata_per_transactional_id.values() if include(m)]
        return Errors.NONE, unknown, listed

    # --- loading and unloading ------------------------------------------------------------------------
    async def load_transactions_for_partition(self, partition: int, coordinator_epoch: int,
                                              send_txn_markers: SendTxnMarkers) -> None:
        """Replay the partition (off the loop) and install its ids unless leadership moved meanwhile;
        transactions caught between Prepare* and Complete* get their markers (re)sent."""
        self.loading_partitions[partition] = coordinator_epoch
        start = now_ms()
        log.info("Loading transaction metadata from %s-%d at epoch %d", TRANSACTION_STATE_TOPIC, partition,
                 coordinator_epoch)
        loaded: dict[str, TransactionMetadata] = {}
        try:
            tp = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
            if tp is None or tp.log is None:
                log.warning("Attempted to load transaction metadata from %s-%d, but found no log",
                            TRANSACTION_STATE_TOPIC, partition)
            else:
                loaded = await self.run_blocking(read_transactions, tp.log, self.config.transaction_log_load_buffer_size)
        except (StorageError, ProtocolError, OSError) as exc:
            log.error("Error loading transactions from transaction log %s-%d: %s", TRANSACTION_STATE_TOPIC,
                      partition, exc)
        if self.loading_partitions.get(partition) != coordinator_epoch or self.shutting_down:
            log.info("Discarding the load of %s-%d at epoch %d: leadership changed meanwhile",
                     TRANSACTION_STATE_TOPIC, partition, coordinator_epoch)
            return
        previous = self.transaction_metadata_cache.get(partition)
        if previous is not None:
            log.warning("Unloaded transaction metadata of %s-%d (epoch %d) as part of loading it at epoch %d",
                        TRANSACTION_STATE_TOPIC, partition, previous.coordinator_epoch, coordinator_epoch)
        self.transaction_metadata_cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        pending = []
        for metadata in loaded.values():
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                pending.append((metadata.state is S.PREPARE_COMMIT, metadata, metadata.prepare_complete(now_ms())))
        # Out of loading first, so the completions these markers lead to can be appended.
        del self.loading_partitions[partition]
        for commit, metadata, transit in pending:
            send_txn_markers(coordinator_epoch, commit, metadata, transit)
        log.info("Finished loading %d transaction metadata from %s-%d in %d milliseconds (%d to complete)",
                 len(loaded), TRANSACTION_STATE_TOPIC, partition, now_ms() - start, len(pending))

    def remove_transactions_for_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Become follower (epoch given: only state from that epoch or older goes) or stop hosting it."""
        loading = self.loading_partitions.get(partition)
        if loading is not None and (coordinator_epoch is None or loading <= coordinator_epoch):
            del self.loading_partitions[partition]
        entry = self.transaction_metadata_cache.get(partition)
        if entry is not None and (coordinator_epoch is None or entry.coordinator_epoch <= coordinator_epoch):
            del self.transaction_metadata_cache[partition]
            log.info("Unloaded transaction metadata of %s-%d (%d ids, epoch %d)", TRANSACTION_STATE_TOPIC,
                     partition, len(entry.metadata_per_transactional_id), entry.coordinator_epoch)

    def owns_loaded_or_loading(self, partition: int) -> bool:
        return partition in self.loading_partitions or partition in self.transaction_metadata_cache

    # --- writes ---------------------------------------------------------------------------------------
    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        new_metadata: TxnTransitMetadata,
                                        retry_on_error: Callable[[Errors], bool] = lambda _error: False) -> Errors:
        """Write ``new_metadata`` (acks=all) and apply it; the error to answer with, NONE on success.

        On failure the pending state is cleared (the transition is abandoned) unless ``retry_on_error``
        says the caller will try the same transition again.
        """
        try:
            found = self.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            return exc.error
        if found is None:
            return Errors.NOT_COORDINATOR  # the metadata has been removed meanwhile
        if found.coordinator_epoch != coordinator_epoch:
            return Errors.NOT_COORDINATOR
        key = records.encode_key(records.TransactionLogKey(transactional_id))
        builder = RecordBatchBuilder(magic=2)
        builder.append(now_ms(), key, records.encode_value(log_value(new_metadata)))
        error = Errors.NONE
        try:
            await self.replica_manager.append_and_wait(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id),
                                                       builder.build(), new_metadata.txn_timeout_ms)
        except KafkaApiError as exc:
            error = append_error(exc.error)
        except StorageError as exc:
            error = append_error(Errors[exc.error_name])
        if error is Errors.NONE:
            return self._complete_appended(transactional_id, coordinator_epoch, new_metadata)
        log.debug("Appending %s's new metadata %s failed due to %s", transactional_id, new_metadata, error.name)
        self._abandon_transition(transactional_id, coordinator_epoch, new_metadata, error, retry_on_error(error))
        return error

    def _complete_appended(self, transactional_id: str, coordinator_epoch: int, new_metadata: TxnTransitMetadata
                           ) -> Errors:
        try:
            found = self.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            log.info("Accessing the cached transaction metadata for %s returns %s error; aborting transition to "
                     "the new metadata", transactional_id, exc.error.name)
            return exc.error
        if found is None or found.coordinator_epoch != coordinator_epoch:
            # Emigration and immigration of the partition meanwhile: let the client find the coordinator again.
            log.info("The cached coordinator metadata of %s changed after its new metadata %s was appended; "
                     "returning NOT_COORDINATOR", transactional_id, new_metadata)
            return Errors.NOT_COORDINATOR
        found.transaction_metadata.complete_transition_to(new_metadata)
        return Errors.NONE

    def _abandon_transition(self, transactional_id: str, coordinator_epoch: int, new_metadata: TxnTransitMetadata,
                            error: Errors, will_retry: bool) -> None:
        try:
            found = self.get_transaction_state(transactional_id)
        except KafkaApiError:
            return
        if found is None or found.coordinator_epoch != coordinator_epoch:
            return
        metadata = found.transaction_metadata
        if will_retry:
            log.info("TransactionalId %s append transaction log for %s transition failed due to %s, not resetting "
                     "pending state but returning the error to let the caller retry", transactional_id,
                     new_metadata, error.name)
        else:
            log.info("TransactionalId %s append transaction log for %s transition failed due to %s, resetting "
                     "pending state %s", transactional_id, new_metadata, error.name, metadata.pending_state)
            metadata.pending_state = None

    async def remove_expired_transactional_ids(self) -> None:
        """Tombstone the ids idle (Empty/Complete*) for ``transactional.id.expiration.ms``, then forget them."""
        current = now_ms()
        for partition, entry in list(self.transaction_metadata_cache.items()):
            expired = [m for m in entry.metadata_per_transactional_id.values()
                       if m.pending_state is None and m.state.is_expiration_allowed
                       and m.txn_last_update_timestamp <= current - self.config.transactional_id_expiration_ms]
            if expired:
                await self._write_tombstones(partition, entry, expired, current)

    async def _write_tombstones(self, partition: int, entry: TxnMetadataCacheEntry,
                                expired: list[TransactionMetadata], timestamp: int) -> None:
        tp = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
        if tp is None or tp.log is None:
            log.warning("Transaction expiration for partition %s-%d failed because the log is not available",
                        TRANSACTION_STATE_TOPIC, partition)
            return
        max_batch_size = tp.log.config.max_message_bytes
        batches: list[tuple[RecordBatchBuilder, list[tuple[TransactionMetadata, TxnTransitMetadata]]]] = []
        for metadata in expired:
            key = records.encode_key(records.TransactionLogKey(metadata.transactional_id))
            if not batches or batches[-1][0].uncompressed_size + len(key) + 64 > max_batch_size:
                batches.append((RecordBatchBuilder(magic=2), []))
            builder, members = batches[-1]
            builder.append(timestamp, key, None)
            members.append((metadata, metadata.prepare_dead()))
        for builder, members in batches:
            error = Errors.NONE
            try:
                await self.replica_manager.append_and_wait(TRANSACTION_STATE_TOPIC, partition, builder.build(),
                                                           self.config.request_timeout_ms)
            except KafkaApiError as exc:
                error = exc.error
            except StorageError as exc:
                error = Errors[exc.error_name]
            current = self.transaction_metadata_cache.get(partition)
            for metadata, transit in members:
                if current is entry and current.coordinator_epoch == entry.coordinator_epoch \
                        and metadata.pending_state is S.DEAD and metadata.producer_epoch == transit.producer_epoch \
                        and error is Errors.NONE:
                    del entry.metadata_per_transactional_id[metadata.transactional_id]
                    log.info("Removed expired transactional id %s", metadata.transactional_id)
                else:
                    log.warning("Failed to remove expired transactionalId: %s from cache. Tombstone append error "
                                "code: %s, pendingState: %s, producerEpoch: %d, expected producerEpoch: %d",
                                metadata.transactional_id, error.name, metadata.pending_state,
                                metadata.producer_epoch, transit.producer_epoch)
                    metadata.pending_state = None

    def shutdown(self) -> None:
        self.shutting_down = True
        self.loading_partitions.clear()
        self.transaction_metadata_cache.clear()
