"""TransactionMarkerChannelManager: writes a finished transaction's markers on its partitions' leaders.

Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler on the
broker's event loop. Once PrepareCommit/PrepareAbort is in the log, one marker entry per
destination broker (producer id and epoch, result, coordinator epoch, the partitions that broker
leads) is queued; a sender sends each broker's queued entries as one WriteTxnMarkers request,
one request in flight per broker. A partition whose marker is written leaves the transaction's
partition set; failed ones are queued again for whoever leads them by then (leader changes,
NOT_LEADER, a dead broker, a leader not known yet), until none is left. Then CompleteCommit /
CompleteAbort is appended (retried while the log is unavailable). Partitions of deleted topics
are dropped, as Kafka drops them. A coordinator that loses the ``__transaction_state`` partition
stops; the new coordinator resends what its load finds unfinished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.coordinator.transaction.transaction_metadata import (
    IllegalTransactionStateError,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
)
from broker.network.network_client import NETWORK_ERRORS, NetworkClient
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import WriteTxnMarkersRequest

if TYPE_CHECKING:
    from broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
    from broker.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1  # what a 3.9 broker (IBP >= 2.8) sends
# Sends WriteTxnMarkers to a broker: (broker id, (host, port), request) -> response; raises NETWORK_ERRORS.
MarkerSender = Callable[[int, tuple[str, int], WriteTxnMarkersRequest], Awaitable[Any]]

RETRIABLE_MARKER_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT, Errors.KAFKA_STORAGE_ERROR})
# The producer or the coordinator moved on (a newer epoch wrote a marker): this transaction is over.
OBSOLETE_MARKER_ERRORS = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})
# The partition cannot hold a marker, so the producer cannot have written to it either.
UNSUPPORTED_MARKER_ERRORS = frozenset({Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION})


@dataclass(eq=False)
class PendingCompleteTxn:
    """A transaction whose markers are being written, and the completion to append after them."""

    transactional_id: str
    coordinator_epoch: int
    txn_metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata


@dataclass(frozen=True)
class TxnMarkerEntry:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class PendingMarker:
    pending: PendingCompleteTxn
    marker: TxnMarkerEntry


@dataclass
class TxnMarkerQueue:
    """Markers for one destination, by ``__transaction_state`` partition (so unloading one drops its own)."""

    destination: tuple[str, int] | None
    by_txn_partition: dict[int, list[PendingMarker]] = field(default_factory=dict)

    def add(self, txn_partition: int, entry: PendingMarker) -> None:
        self.by_txn_partition.setdefault(txn_partition, []).append(entry)

    def remove_txn_partition(self, txn_partition: int) -> list[PendingMarker]:
        return self.by_txn_partition.pop(txn_partition, [])

    def drain(self) -> list[PendingMarker]:
        drained = [entry for entries in self.by_txn_partition.values() for entry in entries]
        self.by_txn_partition.clear()
        return drained

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.by_txn_partition.values())


def write_txn_markers_request(entries: Iterable[PendingMarker]) -> WriteTxnMarkersRequest:
    markers = []
    for entry in entries:
        marker = entry.marker
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(marker.partitions):
            by_topic.setdefault(topic, []).append(partition)
        markers.append(WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch, transaction_result=marker.commit,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=ids)
                    for topic, ids in by_topic.items()],
            coordinator_epoch=marker.coordinator_epoch))
    return WriteTxnMarkersRequest(markers=markers)


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, state_manager: TransactionStateManager, metadata_cache: MetadataCache,
                 listener_name: str, request_timeout_ms: int, retry_backoff_ms: int = 100,
                 sender: MarkerSender | None = None) -> None:
        self.broker_id = broker_id
        self.state_manager = state_manager
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self._sender = sender or self._send_over_network
        self._clients: dict[int, NetworkClient] = {}
        self._queues: dict[int, TxnMarkerQueue] = {}
        self._unknown_broker_queue = TxnMarkerQueue(None)  # leaders not known yet, or not alive
        self._pending: dict[str, PendingCompleteTxn] = {}
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()  # retries waiting for their backoff
        self._wakeup = asyncio.Event()
        self._idle = False  # the sender waits without a timeout: nothing to poll for
        self._runner: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._runner = asyncio.get_running_loop().create_task(self._run(), name="txn-marker-sender")

    async def shutdown(self) -> None:
        tasks = [t for t in (self._runner, *self._tasks, *self._in_flight.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            client.close()
        self._queues.clear()
        self._pending.clear()

    def num_txns_with_pending_markers(self) -> int:
        return len(self._pending)

    # --- queuing ----------------------------------------------------------------------------------------
    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, txn_metadata: TransactionMetadata,
                                new_metadata: TxnTransitMetadata) -> None:
        """Start writing the markers of a transaction whose Prepare state is in the log."""
        transactional_id = txn_metadata.transactional_id
        pending = PendingCompleteTxn(transactional_id, coordinator_epoch, txn_metadata, new_metadata)
        previous = self._pending.get(transactional_id)
        if previous is not None:
            log.info("Replaced an existing pending complete txn %s with %s while adding markers to send",
                     previous, pending)
        self._pending[transactional_id] = pending
        self.add_txn_markers_to_broker_queue(pending, txn_metadata.producer_id, txn_metadata.producer_epoch, commit,
                                             frozenset(txn_metadata.topic_partitions))
        self.maybe_write_txn_completion(transactional_id)

    def add_txn_markers_to_broker_queue(self, pending: PendingCompleteTxn, producer_id: int, producer_epoch: int,
                                        commit: bool, partitions: frozenset[TopicPartition]) -> None:
        """Queue one marker entry per current leader; partitions of deleted topics leave the transaction."""
        txn_partition = self.state_manager.partition_for(pending.transactional_id)
        by_destination: dict[int | None, set[TopicPartition]] = {}
        deleted: set[TopicPartition] = set()
        for tp in partitions:
            state = self.metadata_cache.partition(*tp)
            if state is None:
                deleted.add(tp)
            elif state.leader >= 0 and self.metadata_cache.broker_endpoint(state.leader, self.listener_name):
                by_destination.setdefault(state.leader, set()).add(tp)
            else:
                by_destination.setdefault(None, set()).add(tp)
        woken = False
        for broker, tps in by_destination.items():
            entry = PendingMarker(pending, TxnMarkerEntry(producer_id, producer_epoch, pending.coordinator_epoch,
                                                          commit, frozenset(tps)))
            if broker is None:
                self._unknown_broker_queue.add(txn_partition, entry)  # the sender looks again after a backoff
                woken = woken or self._idle  # a sender waiting for nothing must start polling
                continue
            queue = self._queues.setdefault(broker, TxnMarkerQueue(None))
            queue.destination = self.metadata_cache.broker_endpoint(broker, self.listener_name)
            queue.add(txn_partition, entry)
            woken = True
        if deleted:
            self._drop_deleted_partitions(pending, deleted)
        if woken:
            self._wakeup.set()

    def _drop_deleted_partitions(self, pending: PendingCompleteTxn, deleted: set[TopicPartition]) -> None:
        transactional_id = pending.transactional_id
        try:
            found = self.state_manager.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            log.info("Encountered %s trying to fetch transaction metadata for %s with coordinator epoch %d; cancel "
                     "sending markers to its partition leaders", exc.error.name, transactional_id,
                     pending.coordinator_epoch)
            self.remove_markers_for_txn(pending)
            return
        if found is None or found.coordinator_epoch != pending.coordinator_epoch:
            log.info("The cached metadata of %s has changed since preparing to send markers; cancel sending markers "
                     "to its partition leaders", transactional_id)
            self.remove_markers_for_txn(pending)
            return
        log.info("Couldn't find leader endpoint for partitions %s while trying to send transaction markers for %s, "
                 "these partitions are likely deleted already and hence can be skipped", sorted(deleted),
                 transactional_id)
        for tp in deleted:
            self._remove_partition(found.transaction_metadata, tp)
        self.maybe_write_txn_completion(transactional_id)

    def remove_markers_for_txn_partition(self, txn_partition: int) -> None:
        """The ``__transaction_state`` partition moved: forget its queued markers (the new coordinator resends)."""
        for queue in (self._unknown_broker_queue, *self._queues.values()):
            for entry in queue.remove_txn_partition(txn_partition):
                log.info("Removing marker %s for txn partition %d", entry.marker, txn_partition)
                self.remove_markers_for_txn(entry.pending)

    def remove_markers_for_txn(self, pending: PendingCompleteTxn) -> None:
        if self._pending.get(pending.transactional_id) is pending:
            del self._pending[pending.transactional_id]

    # --- completion -------------------------------------------------------------------------------------
    def maybe_write_txn_completion(self, transactional_id: str) -> None:
        pending = self._pending.get(transactional_id)
        if pending is not None and not pending.txn_metadata.topic_partitions:
            del self._pending[transactional_id]
            self._write_txn_completion(pending)

    def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        transactional_id = pending.transactional_id
        try:
            found = self.state_manager.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            log.info("Cannot append %s for %s (%s): the current coordinator's load completes the transaction",
                     pending.new_metadata.txn_state.state_name, transactional_id, exc.error.name)
            return
        if found is None or found.coordinator_epoch != pending.coordinator_epoch:
            log.info("The cached metadata of %s has changed after completing sending the markers with coordinator "
                     "epoch %d; abort transiting it to %s", transactional_id, pending.coordinator_epoch,
                     pending.new_metadata.txn_state.state_name)
            return
        self._spawn(self._try_append_to_log(pending))

    async def _try_append_to_log(self, pending: PendingCompleteTxn) -> None:
        error = await self.state_manager.append_transaction_to_log(
            pending.transactional_id, pending.coordinator_epoch, pending.new_metadata,
            retry_on_error=lambda e: e is Errors.COORDINATOR_NOT_AVAILABLE)
        if error is Errors.NONE:
            log.debug("Completed transaction for %s with coordinator epoch %d, final state %s",
                      pending.transactional_id, pending.coordinator_epoch, pending.new_metadata.txn_state.state_name)
        elif error is Errors.COORDINATOR_NOT_AVAILABLE:
            log.info("Not available to append the completion of %s; retrying", pending.transactional_id)
            self._after_backoff(self._retry_completion, pending)
        elif error in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS):
            log.info("No longer the coordinator for %s (%s); skip writing its completion to the transaction log",
                     pending.transactional_id, error.name)
        else:
            log.error("Unexpected error %s while appending to transaction log for %s", error.name,
                      pending.transactional_id)

    def _retry_completion(self, pending: PendingCompleteTxn) -> None:
        self._spawn(self._try_append_to_log(pending))

    # --- the sender ----------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._idle = not self._unknown_broker_queue
            try:
                async with asyncio.timeout(None if self._idle else self.retry_backoff_s):
                    await self._wakeup.wait()
            except TimeoutError:
                pass
            self._idle = False
            self._wakeup.clear()
            self._generate_requests()

    def _generate_requests(self) -> None:
        for entry in self._unknown_broker_queue.drain():
            marker = entry.marker
            self.add_txn_markers_to_broker_queue(entry.pending, marker.producer_id, marker.producer_epoch,
                                                 marker.commit, marker.partitions)
        for broker, queue in self._queues.items():
            if broker in self._in_flight or not queue or queue.destination is None:
                continue
            entries = queue.drain()
            task = asyncio.get_running_loop().create_task(self._send(broker, queue.destination, entries),
                                                          name=f"txn-markers-to-{broker}")
            self._in_flight[broker] = task

    async def _send(self, broker: int, destination: tuple[str, int], entries: list[PendingMarker]) -> None:
        try:
            try:
                response = await self._sender(broker, destination, write_txn_markers_request(entries))
            except NETWORK_ERRORS as exc:
                log.info("WriteTxnMarkers to broker %d failed (%s); markers go to the partitions' current leaders",
                         broker, exc)
                await asyncio.sleep(self.retry_backoff_s)
                for entry in entries:
                    self._requeue(entry, entry.marker.partitions)
            else:
                self._on_response(entries, response)
        finally:
            self._in_flight.pop(broker, None)
            self._wakeup.set()

    async def _send_over_network(self, broker: int, destination: tuple[str, int],
                                 request: WriteTxnMarkersRequest) -> Any:
        client = self._clients.get(broker)
        if client is None:
            client = self._clients[broker] = NetworkClient(f"broker-{self.broker_id}-txn-marker-sender",
                                                           self.request_timeout_s)
        return await client.send(destination, request, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)

    def _current_metadata(self, entry: PendingMarker) -> TransactionMetadata | None:
        """The transaction's metadata if this coordinator still completes it at the marker's epoch."""
        transactional_id = entry.pending.transactional_id
        try:
            found = self.state_manager.get_transaction_state(transactional_id)
        except KafkaApiError as exc:
            log.info("No longer able to complete %s (%s); cancel sending transaction markers %s", transactional_id,
                     exc.error.name, entry.marker)
            self.remove_markers_for_txn(entry.pending)
            return None
        if found is None or found.coordinator_epoch != entry.marker.coordinator_epoch:
            log.info("Transaction coordinator epoch for %s has changed from %d; cancel sending transaction markers %s",
                     transactional_id, entry.marker.coordinator_epoch, entry.marker)
            self.remove_markers_for_txn(entry.pending)
            return None
        return found.transaction_metadata

    def _on_response(self, entries: list[PendingMarker], response: Any) -> None:
        errors_by_producer: dict[int, dict[TopicPartition, Errors]] = {}
        for result in response.markers:
            errors = errors_by_producer.setdefault(result.producer_id, {})
            for topic in result.topics:
                for p in topic.partitions:
                    errors[(topic.name, p.partition_index)] = Errors(p.error_code)
        for entry in entries:
            metadata = self._current_metadata(entry)
            if metadata is not None:
                self._complete_marker(entry, metadata, errors_by_producer.get(entry.marker.producer_id, {}))

    def _complete_marker(self, entry: PendingMarker, metadata: TransactionMetadata,
                         errors: dict[TopicPartition, Errors]) -> None:
        transactional_id, marker = entry.pending.transactional_id, entry.marker
        retry: set[TopicPartition] = set()
        for tp in sorted(marker.partitions):
            error = errors.get(tp)
            if error is Errors.NONE:
                self._remove_partition(metadata, tp)
            elif error in UNSUPPORTED_MARKER_ERRORS:
                log.info("Sending %s's transaction marker for %s-%d failed with %s; the partition no longer waits "
                         "for it", transactional_id, *tp, error.name)
                self._remove_partition(metadata, tp)
            elif error in OBSOLETE_MARKER_ERRORS:
                log.info("Sending %s's transaction marker for %s-%d has permanently failed with %s; cancel sending "
                         "any more transaction markers %s", transactional_id, *tp, error.name, marker)
                self.remove_markers_for_txn(entry.pending)
                return
            else:
                # Retriable; Kafka gives up on anything else (leaving the transaction stuck), a retry at least
                # lets a recovered leader take the marker.
                level = logging.INFO if error in RETRIABLE_MARKER_ERRORS else logging.ERROR
                log.log(level, "Sending %s's transaction marker for %s-%d failed with %s; retrying",
                        transactional_id, *tp, error.name if error is not None else "no answer for the partition")
                retry.add(tp)
        if retry:
            self._after_backoff(self._requeue, entry, frozenset(retry))
        else:
            self.maybe_write_txn_completion(transactional_id)

    def _requeue(self, entry: PendingMarker, partitions: frozenset[TopicPartition]) -> None:
        """After a backoff (the leader may be moving), to whoever leads the partitions by now."""
        if self._current_metadata(entry) is not None:
            marker = entry.marker
            self.add_txn_markers_to_broker_queue(entry.pending, marker.producer_id, marker.producer_epoch,
                                                 marker.commit, partitions)

    @staticmethod
    def _remove_partition(metadata: TransactionMetadata, tp: TopicPartition) -> None:
        try:
            metadata.remove_partition(tp)
        except IllegalTransactionStateError as exc:
            log.error("%s", exc)

    def _after_backoff(self, callback: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            self._timers.discard(handle)
            callback(*args)

        handle = asyncio.get_running_loop().call_later(self.retry_backoff_s, run)
        self._timers.add(handle)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
