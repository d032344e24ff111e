"""CleanedTransactionMetadata: transaction state carried through one pass of the cleaner.

It walks the log in offset order with the aborted transactions of the transaction index and
answers, per batch, whether the batch belongs to an aborted transaction (then its records
go) and, per marker, whether the marker may go: an ABORT marker once no batch of its
transaction is left, a COMMIT marker once none of its transaction's batches was seen. A
kept ABORT marker is written back to the cleaned segment's transaction index.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from protocol.records.control import ControlRecordType
from protocol.records.log_entry import LogEntryHeader
from storage.transaction_index import AbortedTxn, TransactionIndex


@dataclass(slots=True)
class _AbortedTransactionMetadata:
    aborted_txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTransactionMetadata] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # min-heap on first offset
        self._sequence = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._aborted, (txn.first_offset, self._sequence, txn))
            self._sequence += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        aborted = self._aborted
        while aborted and aborted[0][0] <= offset:
            txn = heapq.heappop(aborted)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTransactionMetadata(txn))

    def on_control_batch_read(self, header: LogEntryHeader, control_type: ControlRecordType | None,
                              empty: bool) -> bool:
        """True when the marker batch may be discarded (``empty``: a batch the cleaner already emptied)."""
        self._consume_aborted_up_to(header.last_offset)
        if empty:
            return True
        producer_id = header.producer_id
        if control_type is ControlRecordType.ABORT:
            metadata = self._ongoing_aborted.pop(producer_id, None)
            if metadata is not None and metadata.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(metadata.aborted_txn)
                return False
            return True
        if control_type is ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, header: LogEntryHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        metadata = self._ongoing_aborted.get(header.producer_id)
        if metadata is not None:
            metadata.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False
