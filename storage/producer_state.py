"""Producer state for idempotence and transactions (Kafka's ProducerStateManager).

Per producer id: its epoch, the metadata of its last five batches (for duplicate detection),
the coordinator epoch of its last marker and the first offset of its open transaction.
Snapshots (``<offset>.snapshot``, CRC-32C protected) are taken at every roll and at clean
shutdown; on load the newest valid one is read and the log after it is replayed.

KIP-890 verification: before a producer's first transactional write to this partition the
leader asks the transaction coordinator whether the partition is in the transaction. A
``VerificationStateEntry`` holds a unique ``VerificationGuard`` for that question; only an
append carrying that very guard may start the transaction, so a verification answered before
an abort marker can never open a transaction the coordinator does not know about.
"""

from __future__ import annotations

import enum
import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field

from crc32c import crc32c

from protocol.records.batch import Buffer
from protocol.records.control import ControlRecordType, EndTransactionMarker, parse_control_type
from protocol.records.log_entry import decode_entry_records

from storage.checkpoints import write_atomically
from storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from storage.log_files import SNAPSHOT_SUFFIX, file_name, offset_from_file_name

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hI")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes


class AppendOrigin(enum.Enum):
    """Who is appending decides how much is validated (Kafka's AppendOrigin)."""

    CLIENT = "client"  # leader append of producer data: full epoch + sequence checks
    COORDINATOR = "coordinator"  # group/txn coordinator writes: epoch checks only
    REPLICATION = "replication"  # follower fetch or log recovery: trusted, only tracked


@dataclass(slots=True)
class ProducerStateManagerConfig:
    """Shared by every log of a broker, so one change reaches all of them (Kafka's ProducerStateManagerConfig)."""

    producer_id_expiration_ms: int = 86400000
    transaction_verification_enabled: bool = True


class VerificationGuard:
    """A unique token: only the append that carries the very guard a verification created passes."""

    __slots__ = ()

    def verify(self, request_guard: VerificationGuard) -> bool:
        return request_guard is not SENTINEL_GUARD and request_guard is self


SENTINEL_GUARD = VerificationGuard()  # "no verification": never verifies anything


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer's pending verification: its guard, and the lowest sequence and epoch seen meanwhile."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence
        elif epoch == self.epoch:
            self.lowest_sequence = min(sequence, self.lowest_sequence)


def decrement_sequence(sequence: int, decrement: int) -> int:
    return sequence - decrement + INT32_MAX + 1 if sequence < decrement else sequence - decrement


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
            self.current_txn_first_offset, deque(self.batch_metadata),
        )

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[0].first_seq

    @property
    def last_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[-1].last_seq

    @property
    def last_data_offset(self) -> int:
        return -1 if self.is_empty else self.batch_metadata[-1].last_offset

    @property
    def last_offset_delta(self) -> int:
        return 0 if self.is_empty else self.batch_metadata[-1].offset_delta

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if producer_epoch != self.producer_epoch:
            return None
        for metadata in self.batch_metadata:
            if metadata.first_seq == first_seq and metadata.last_seq == last_seq:
                return metadata
        return None


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """Validates one producer's batches of one append against its state before the write."""

    def __init__(self, topic_partition: str, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin,
                 verification: VerificationStateEntry | None = None) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.verification = verification
        self.updated = current.copy()
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch < self.updated.producer_epoch:
            message = (
                f"epoch of producer {self.producer_id} at offset {offset} in {self.topic_partition} is "
                f"{producer_epoch}, which is smaller than the last seen epoch {self.updated.producer_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning(message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        verification = self.verification
        if verification is not None and first_seq > verification.lowest_sequence:
            # a verified transaction must start with the lowest sequence sent while it was verified
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition}: {first_seq} (incoming seq. number), {verification.lowest_sequence} "
                f"(earliest seen sequence)"
            )
        if producer_epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {self.producer_id} at offset {offset} in "
                    f"{self.topic_partition}: {producer_epoch} (request epoch), {first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)"
                )
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif producer_epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        in_sequence = first_seq == current_last_seq + 1 or (first_seq == 0 and current_last_seq == INT32_MAX)
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition}: {first_seq} (incoming seq. number), {current_last_seq} "
                f"(current end sequence number)"
            )

    def append_data_batch(
        self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
        first_offset: int, last_offset: int, is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if self.updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"expected transactional write from producer {self.producer_id} at offset {first_offset} "
                f"in {self.topic_partition}"
            )
        if self.updated.current_txn_first_offset is None and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, producer_epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset)
        if self.updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"invalid coordinator epoch for producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition}: {marker.coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            log.info(message)
        first = self.updated.current_txn_first_offset
        completed = None if first is None else CompletedTxn(self.producer_id, first, offset, not marker.is_commit)
        self.updated.maybe_update_producer_epoch(producer_epoch)
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = timestamp
        return completed


class ProducerStateManager:
    def __init__(self, log_dir: str, topic_partition: str, config: ProducerStateManagerConfig | None = None) -> None:
        self.log_dir = log_dir
        self.topic_partition = topic_partition
        self.config = config or ProducerStateManagerConfig()
        self.producers: dict[int, ProducerStateEntry] = {}
        self._verifications: dict[int, VerificationStateEntry] = {}
        self._ongoing: dict[int, TxnMetadata] = {}  # first offset -> txn
        self._unreplicated: dict[int, TxnMetadata] = {}  # completed, not yet below the high watermark
        self.map_end_offset = 0
        self.last_snap_offset = 0
        self._snapshots: dict[int, str] = self._list_snapshots()

    # --- snapshots on disk ------------------------------------------------------------------
    def _list_snapshots(self) -> dict[int, str]:
        found = {}
        for name in os.listdir(self.log_dir):
            if name.endswith(SNAPSHOT_SUFFIX):
                offset = offset_from_file_name(name)
                if offset is not None:
                    found[offset] = os.path.join(self.log_dir, name)
        return dict(sorted(found.items()))

    def update_parent_dir(self, directory: str) -> None:
        """The log's directory was renamed: snapshots keep their names."""
        self.log_dir = directory
        self._snapshots = {o: os.path.join(directory, os.path.basename(p)) for o, p in self._snapshots.items()}

    def latest_snapshot_offset(self) -> int | None:
        return next(reversed(self._snapshots), None)

    def remove_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [o for o in self._snapshots if o < offset]:
            self.remove_snapshot(snap)

    def take_snapshot(self) -> None:
        """Write ``<map end offset>.snapshot`` if the state moved since the last one."""
        if self.map_end_offset <= self.last_snap_offset:
            return
        path = os.path.join(self.log_dir, file_name(self.map_end_offset, SNAPSHOT_SUFFIX))
        write_atomically(path, encode_snapshot(self.producers.values()))
        self._snapshots[self.map_end_offset] = path
        self._snapshots = dict(sorted(self._snapshots.items()))
        self.last_snap_offset = self.map_end_offset

    # --- loading ----------------------------------------------------------------------------
    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside the log, then load the newest usable one (replay is the caller's)."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self.remove_snapshot(offset)
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self._ongoing.clear()
            self._unreplicated.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        for offset in reversed(list(self._snapshots)):
            path = self._snapshots[offset]
            try:
                with open(path, "rb") as f:
                    entries = decode_snapshot(f.read(), path)
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("deleting unusable producer snapshot %s: %s", path, exc)
                self.remove_snapshot(offset)
                continue
            self.last_snap_offset = self.map_end_offset = offset
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_entry(entry)
            return
        self.last_snap_offset = self.map_end_offset = log_start_offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            first = entry.current_txn_first_offset
            self._ongoing[first] = TxnMetadata(entry.producer_id, first)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return entry.current_txn_first_offset is None and \
            now_ms - entry.last_timestamp >= self.config.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget idle producers without an open transaction, and verifications never used."""
        for pid in [pid for pid, e in self.producers.items() if self._is_expired(now_ms, e)]:
            del self.producers[pid]
        expiration = self.config.producer_id_expiration_ms
        for pid in [pid for pid, v in self._verifications.items() if now_ms - v.timestamp >= expiration]:
            del self._verifications[pid]

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for snap in list(self._snapshots):
            self.remove_snapshot(snap)
        self.last_snap_offset = self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        for first in [f for f, t in self._unreplicated.items() if t.last_offset is not None and t.last_offset < log_start_offset]:
            del self._unreplicated[first]
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self.last_snap_offset = latest if latest is not None else log_start_offset

    # --- appends ----------------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.topic_partition, producer_id, current, origin,
                                  self._verifications.get(producer_id))

    def update(self, info: ProducerAppendInfo) -> None:
        self.producers[info.producer_id] = info.updated
        for txn in info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # --- transactions -----------------------------------------------------------------------
    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Whatever its epoch, as Kafka 3.9's UnifiedLog.hasOngoingTransaction (a batch of another
        epoch then meets the epoch and sequence checks instead of a verification)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              now_ms: int) -> VerificationStateEntry:
        """The producer's pending verification (created if none), updated with this request's sequence."""
        entry = self._verifications.get(producer_id)
        if entry is None:
            entry = self._verifications[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        entry = self._verifications.get(producer_id)
        return SENTINEL_GUARD if entry is None else entry.guard

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verifications.pop(producer_id, None)

    def first_unstable_offset(self) -> int | None:
        candidates = [min(d) for d in (self._unreplicated, self._ongoing) if d]
        return min(candidates) if candidates else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` ends: the next other open transaction's start, else past its marker."""
        for first in sorted(self._ongoing):
            if self._ongoing[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise InvalidTxnStateError(
                f"attempted to complete transaction {completed} on {self.topic_partition}, which was not started"
            )
        self._unreplicated[completed.first_offset] = TxnMetadata(txn.producer_id, txn.first_offset, completed.last_offset)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if not self._unreplicated:  # every append of a produce moves the HW: mostly nothing to drop
            return
        for first in [f for f, t in self._unreplicated.items() if t.last_offset is not None and t.last_offset < high_watermark]:
            del self._unreplicated[first]


def encode_snapshot(entries: object) -> bytes:
    body = bytearray(struct.pack(">i", 0))
    count = 0
    for entry in entries:  # type: ignore[attr-defined]
        metadata = entry.batch_metadata[-1] if entry.batch_metadata else None
        body += _SNAPSHOT_ENTRY.pack(
            entry.producer_id, entry.producer_epoch,
            metadata.last_seq if metadata else NO_SEQUENCE,
            metadata.last_offset if metadata else -1,
            metadata.offset_delta if metadata else 0,
            entry.last_timestamp, entry.coordinator_epoch,
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        )
        count += 1
    struct.pack_into(">i", body, 0, count)
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[ProducerStateEntry]:
    if len(data) < _SNAPSHOT_HEADER.size + 4:
        raise CorruptSnapshotError(f"producer snapshot {path} is truncated ({len(data)} bytes)")
    version, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"producer snapshot {path} has unknown version {version}")
    body = data[_SNAPSHOT_HEADER.size :]
    if crc32c(body) != crc:
        raise CorruptSnapshotError(f"producer snapshot {path} failed its CRC check")
    (count,) = struct.unpack_from(">i", body, 0)
    if count < 0 or len(body) != 4 + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"producer snapshot {path} declares {count} entries but has {len(body) - 4} bytes")
    entries = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, offset_delta, ts, coord_epoch, txn_first = _SNAPSHOT_ENTRY.unpack_from(
            body, 4 + i * _SNAPSHOT_ENTRY.size
        )
        metadata = deque([BatchMetadata(last_seq, last_offset, offset_delta, ts)]) if last_offset >= 0 else deque()
        entries.append(ProducerStateEntry(pid, epoch, coord_epoch, ts, None if txn_first < 0 else txn_first, metadata))
    return entries


def read_end_txn_marker(batch: Buffer) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker of a control batch; None for other control types or a cleaned, empty batch."""
    records = decode_entry_records(batch, 0)
    if not records or parse_control_type(records[0].key) not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return EndTransactionMarker.decode(records[0].key, records[0].value)
