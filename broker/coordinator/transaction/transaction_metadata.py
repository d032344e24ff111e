"""TransactionMetadata: one transactional id's state machine (Kafka's TransactionMetadata).

A change is made in two steps, as in Kafka: ``prepare_*`` checks the transition is legal and
returns the target as an immutable ``TxnTransitMetadata`` while recording it as the pending
state (which makes concurrent requests answer CONCURRENT_TRANSACTIONS); once the target is in
the transaction log, ``complete_transition_to`` applies it. A failed append clears the pending
state and leaves the metadata as it was.

States (``TransactionState``) and who moves between them::

    Empty/CompleteCommit/CompleteAbort --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit/PrepareAbort
    PrepareCommit/PrepareAbort --all markers written--> CompleteCommit/CompleteAbort
    Ongoing --InitProducerId or timeout--> PrepareEpochFence (pending only) --> PrepareAbort
    Empty/CompleteCommit/CompleteAbort --InitProducerId--> Empty (epoch bump) / --expiration--> Dead
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from protocol.errors import Errors, KafkaApiError

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = (1 << 15) - 1  # Short.MaxValue: kept free so the coordinator can always fence

TopicPartition = tuple[str, int]


class IllegalTransactionStateError(RuntimeError):
    """A transition Kafka's coordinator treats as a bug (its IllegalStateException)."""


class TransactionState(enum.IntEnum):
    """The states with the ids Kafka writes as TransactionStatus and the names DescribeTransactions shows."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS_STATES[self]

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


S = TransactionState
_NAMES = {S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit", S.PREPARE_ABORT: "PrepareAbort",
          S.COMPLETE_COMMIT: "CompleteCommit", S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
          S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Epoch Short.MaxValue is never handed to a client, so the coordinator can always bump to fence it."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to the log and applied after."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


class TransactionMetadata:
    def __init__(self, transactional_id: str, producer_id: int, last_producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, txn_timeout_ms: int, state: TransactionState,
                 topic_partitions: set[TopicPartition] | None = None, txn_start_timestamp: int = -1,
                 txn_last_update_timestamp: int = -1) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        # The state a prepared transition goes to, until it is completed or abandoned.
        self.pending_state: TransactionState | None = None
        # A fencing epoch bump whose log append failed: the next fence reuses the bumped epoch (it was
        # never handed to a client) instead of bumping again.
        self.has_failed_epoch_fence = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` is written (or ``tp`` is gone): it no longer waits for one."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransactionStateError(
                f"Transaction metadata's current state is {self.state.state_name}, and its pending state is "
                f"{self.pending_state} while trying to remove partitions whose txn marker has been sent")
        self.topic_partitions.discard(tp)

    # --- preparing transitions -------------------------------------------------------------------------
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalTransactionStateError("Cannot fence producer with epoch equal to Short.MaxValue "
                                               "since this would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                                           self.txn_timeout_ms, frozenset(self.topic_partitions),
                                           self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         update_timestamp: int) -> TxnTransitMetadata:
        """InitProducerId on an idle id: bump the epoch (a retry of a bump gets the same epoch again).

        Raises KafkaApiError(PRODUCER_FENCED) when the expected epoch is neither the current nor the last one.
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateError(f"Cannot allocate any more producer epochs for producerId "
                                               f"{self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("Expected producer epoch %d does not match current producer epoch %d or previous producer "
                     "epoch %d", expected_producer_epoch, self.producer_epoch, self.last_producer_epoch)
            raise KafkaApiError(Errors.PRODUCER_FENCED)
        return self._prepare_transition_to(S.EMPTY, self.producer_id, next_epoch, last_epoch, new_txn_timeout_ms,
                                           frozenset(), -1, update_timestamp)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise IllegalTransactionStateError("Cannot rotate producer ids while a transaction is still pending")
        return self._prepare_transition_to(S.EMPTY, new_producer_id, 0,
                                           self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                           new_txn_timeout_ms, frozenset(), -1, update_timestamp)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], update_timestamp: int) -> TxnTransitMetadata:
        starts_now = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare_transition_to(S.ONGOING, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(self.topic_partitions | added),
                                           update_timestamp if starts_now else self.txn_start_timestamp,
                                           update_timestamp)

    def prepare_abort_or_commit(self, new_state: TransactionState, update_timestamp: int) -> TxnTransitMetadata:
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(self.topic_partitions), self.txn_start_timestamp,
                                           update_timestamp)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False  # the fencing epoch reached the log with the Prepare state
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                                           self.txn_start_timestamp, update_timestamp)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare_transition_to(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                           self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                                           self.txn_last_update_timestamp)

    def _prepare_transition_to(self, new_state: TransactionState, new_producer_id: int, new_epoch: int,
                               new_last_epoch: int, new_txn_timeout_ms: int,
                               new_topic_partitions: frozenset[TopicPartition], new_txn_start_timestamp: int,
                               update_timestamp: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {new_state.state_name} while it already a pending "
                f"state {self.pending_state.state_name}")
        if new_producer_id < 0:
            raise ValueError(f"Illegal new producer id {new_producer_id}")
        # A new id's epoch stays NO_PRODUCER_EPOCH only until it expires (Dead).
        if new_state is not S.DEAD and new_epoch < 0:
            raise ValueError(f"Illegal new producer epoch {new_epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {new_state.state_name} failed since the target state "
                f"{new_state.state_name} is not a valid previous state of the current state {self.state.state_name}")
        transit = TxnTransitMetadata(new_producer_id, self.producer_id, new_epoch, new_last_epoch, new_txn_timeout_ms,
                                     new_state, new_topic_partitions, new_txn_start_timestamp, update_timestamp)
        log.debug("TransactionalId %s prepare transition from %s to %s", self.transactional_id,
                  self.state.state_name, transit)
        self.pending_state = new_state
        return transit

    # --- completing them ------------------------------------------------------------------------------
    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` once it is in the log; anything that does not follow the prepared transition is a bug."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransactionStateError(f"TransactionalId {self.transactional_id} completing transaction state "
                                               "transition while it does not have a pending state")
        if to_state is not transit.txn_state:
            self._transition_failure(transit)
        if to_state is S.EMPTY:  # from InitProducerId
            if (self.producer_epoch != transit.producer_epoch and not self._valid_producer_epoch_bump(transit)) \
                    or transit.topic_partitions or transit.txn_start_timestamp != -1:
                self._transition_failure(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state is S.ONGOING:  # from AddPartitions/AddOffsets
            if not self._valid_producer_epoch(transit) or not self.topic_partitions <= transit.topic_partitions \
                    or self.txn_timeout_ms != transit.txn_timeout_ms:
                self._transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # from EndTxn (or a fence)
            if not self._valid_producer_epoch(transit) or self.topic_partitions != transit.topic_partitions \
                    or self.txn_timeout_ms != transit.txn_timeout_ms \
                    or self.txn_start_timestamp != transit.txn_start_timestamp:
                self._transition_failure(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # every marker written
            if not self._valid_producer_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms \
                    or transit.txn_start_timestamp == -1:
                self._transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        elif to_state is S.PREPARE_EPOCH_FENCE:
            # Never completed: a fence is immediately turned into PrepareAbort, which is what reaches the log.
            self._transition_failure(transit)
        else:  # Dead: an expiring id is removed from the cache, never moved to Dead in place
            raise IllegalTransactionStateError(
                f"TransactionalId {self.transactional_id} is trying to complete a transition to Dead; the only "
                "acceptable completion of an expiration is removing the metadata from the cache")
        log.debug("TransactionalId %s complete transition from %s to %s", self.transactional_id,
                  self.state.state_name, transit)
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or \
            (transit.producer_epoch == 0 and transit.producer_id != self.producer_id)

    def _transition_failure(self, transit: TxnTransitMetadata) -> None:
        log.error("%r's transition to %s failed: this should not happen", self, transit)
        raise IllegalTransactionStateError(f"TransactionalId {self.transactional_id} failed transition to state "
                                           f"{transit} due to unexpected metadata")

    def __repr__(self) -> str:
        pending = self.pending_state.state_name if self.pending_state is not None else None
        return (f"TransactionMetadata(transactionalId={self.transactional_id}, producerId={self.producer_id}, "
                f"producerEpoch={self.producer_epoch}, txnTimeoutMs={self.txn_timeout_ms}, "
                f"state={self.state.state_name}, pendingState={pending}, topicPartitions={self.topic_partitions}, "
                f"txnStartTimestamp={self.txn_start_timestamp}, txnLastUpdateTimestamp={self.txn_last_update_timestamp})")
