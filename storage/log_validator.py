"""Checks and in-place rewrites of the batches of one append, before the Log writes them.

Kafka's LogValidator and UnifiedLog.analyzeAndValidate{Records,ProducerState} roles: framing,
CRC, size and per-origin checks batch by batch (each header parsed once, nothing per record),
offset/epoch/LogAppendTime assignment for leader appends, the offset order of follower appends,
and the producer-state update (idempotence, transactions) the append would make. Nothing here
takes the log's lock or touches files: the Log calls these under its lock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import (
    BATCH_LENGTH_OFFSET,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
    read_batch_header,
    set_log_append_time,
)
from protocol.records.log_entry import LogEntryHeader, read_log_entry, validate_log_entry
from storage.errors import (
    CorruptRecordStorageError,
    InvalidRecordError,
    InvalidTxnStateError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    VerificationGuard,
    read_end_txn_marker,
)

_ENTRY_LENGTH = struct.Struct(">i")  # the size field every log entry has at +8
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # the first 16 bytes of a v2 batch

Batches = list[tuple[int, LogEntryHeader]]  # (position in the append buffer, parsed header)
# the batches, their record count, max timestamp, index of the first batch with it (-1: none),
# whether any batch has a producer id
ValidatedRecords = tuple[Batches, int, int, int, bool]
_CLIENT = AppendOrigin.CLIENT  # a module global reads faster than the enum attribute, per append


@dataclass(slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    num_batches: int
    num_records: int
    duplicate: bool = False
    completed_txns: list[CompletedTxn] = field(default_factory=list)


def analyze_and_validate_records(
    records: Buffer, topic_partition: str, max_message_bytes: int, origin: AppendOrigin,
    assign_offsets: bool, check_crc: bool = True, parsed: Batches | None = None,
) -> ValidatedRecords:
    """Every batch of ``records`` with its header, and the append's tally (see ValidatedRecords);
    raises before anything is written (framing and CRC errors of any batch before the other checks).

    ``check_crc=False`` is only for bytes whose CRCs the caller has already checked; ``parsed``
    is the batches such a caller found while checking them (framing and CRC), not parsed again.
    """
    batches = _parse(records, topic_partition, check_crc) if parsed is None else parsed
    num_records, max_ts, max_ts_batch, has_producer_ids = 0, NO_TIMESTAMP, -1, False
    from_client = origin is _CLIENT
    for index, (position, header) in enumerate(batches):
        if header.batch_length + LOG_OVERHEAD > max_message_bytes:  # its size (a slot read, not the property)
            raise RecordTooLargeError(
                f"batch of {header.size} bytes at position {position} exceeds max.message.bytes "
                f"{max_message_bytes} of {topic_partition}"
            )
        if header.magic != 2:
            if assign_offsets:
                raise InvalidRecordError(
                    f"leader appends to {topic_partition} take magic 2 batches; convert magic {header.magic} first"
                )
        elif from_client:
            if header.base_offset != 0:
                raise InvalidRecordError(
                    f"the baseOffset of the record batch in the append to {topic_partition} should be 0, "
                    f"but it is {header.base_offset}"
                )
            if header.attributes & CONTROL_FLAG_MASK:
                raise InvalidRecordError(f"clients may not append control batches to {topic_partition}")
        num_records += header.record_count
        if header.max_timestamp > max_ts:
            max_ts, max_ts_batch = header.max_timestamp, index
        if header.producer_id >= 0:
            has_producer_ids = True
    return batches, num_records, max_ts, max_ts_batch, has_producer_ids


def _parse(records: Buffer, topic_partition: str, check_crc: bool) -> Batches:
    """Each log entry's position and header: framing checked (a partial tail is refused), CRC too if asked."""
    batches: Batches = []
    end = len(records)
    position = 0
    parse_any = validate_log_entry if check_crc else read_log_entry
    entry_length = _ENTRY_LENGTH.unpack_from
    while end - position >= LOG_OVERHEAD:
        (length,) = entry_length(records, position + BATCH_LENGTH_OFFSET)
        size = length + LOG_OVERHEAD
        if length < 0:
            raise CorruptRecordStorageError(
                f"append to {topic_partition}: log entry at position {position} has negative size {length}"
            )
        if position + size > end:
            break
        v2 = size > MAGIC_OFFSET and records[position + MAGIC_OFFSET] == 2
        try:
            batches.append((position, read_batch_header(records, position, check_crc=check_crc) if v2
                            else parse_any(records, position)))
        except CorruptRecordError as exc:
            raise CorruptRecordStorageError(f"append to {topic_partition}: {exc}") from exc
        position += size
    if position != end:
        raise CorruptRecordStorageError(f"append to {topic_partition} ends with {end - position} bytes of a partial batch")
    return batches


def assign_offsets_and_epoch(
    records: Buffer, batches: Batches, first_offset: int, leader_epoch: int, log_append_time: int
) -> None:
    """Stamp offsets from ``first_offset``, the leader epoch and (unless NO_TIMESTAMP) the
    LogAppendTime into the magic 2 batches, in place; the headers follow."""
    offset = first_offset
    pack_leading_fields = _OFFSET_LENGTH_EPOCH.pack_into
    for position, header in batches:
        # baseOffset, batchLength (rewritten unchanged) and partitionLeaderEpoch in one pack,
        # as set_base_offset + set_partition_leader_epoch would write them; none is CRC-covered
        pack_leading_fields(records, position, offset, header.batch_length, leader_epoch)  # type: ignore[arg-type]
        header.base_offset = offset
        header.partition_leader_epoch = leader_epoch  # type: ignore[union-attr]
        if log_append_time != NO_TIMESTAMP:
            set_log_append_time(records, position, log_append_time)  # type: ignore[arg-type]
            header.max_timestamp = log_append_time
        offset += header.last_offset_delta + 1  # type: ignore[union-attr]


def check_follower_offsets(batches: Batches, expected: int, topic_partition: str) -> int:
    """A follower's batches must start at or past the log end and keep increasing; returns the next offset."""
    for position, header in batches:
        first = header.base_offset if header.magic >= 2 else header.last_offset
        if first < expected:
            raise UnexpectedAppendOffsetError(
                f"follower append to {topic_partition} at offset {first} (position {position}) "
                f"is below the expected offset {expected}"
            )
        expected = header.next_offset
    return expected


def analyze_producer_state(
    producers: ProducerStateManager, records: Buffer, batches: Batches, origin: AppendOrigin,
    verification_guard: VerificationGuard,
) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
    """The producer updates and completed transactions of the append, or the duplicate it repeats.

    A transactional data batch from a client or coordinator may start a transaction only with
    the guard of its producer's pending verification (KIP-890), as Kafka's UnifiedLog checks.
    """
    updated: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    for position, header in batches:
        if header.magic < 2 or header.producer_id < 0:
            continue
        assert isinstance(header, BatchHeader)
        if origin is AppendOrigin.CLIENT:
            entry = producers.last_entry(header.producer_id)
            if entry is not None:
                duplicate = entry.find_duplicate_batch(header.producer_epoch, header.base_sequence, header.last_sequence)
                if duplicate is not None:
                    return updated, completed, duplicate
        if header.is_transactional and origin is not AppendOrigin.REPLICATION and not header.is_control \
                and producers.config.transaction_verification_enabled \
                and not producers.has_ongoing_transaction(header.producer_id) \
                and not producers.verification_guard(header.producer_id).verify(verification_guard):
            raise InvalidTxnStateError(
                f"record of producer {header.producer_id} to {producers.topic_partition} was not part of an "
                f"ongoing transaction")
        info = updated.get(header.producer_id)
        if info is None:
            info = updated[header.producer_id] = producers.prepare_update(header.producer_id, origin)
        if header.is_control:
            marker = read_end_txn_marker(memoryview(records)[position : position + header.size])
            if marker is not None:
                txn = info.append_end_txn_marker(marker, header.producer_epoch, header.base_offset, header.max_timestamp)
                if txn is not None:
                    completed.append(txn)
        else:
            info.append_data_batch(
                header.producer_epoch, header.base_sequence, header.last_sequence, header.max_timestamp,
                header.base_offset, header.last_offset, header.is_transactional,
            )
        if header.is_transactional:  # the transaction has its first offset now, or is complete
            producers.clear_verification_state_entry(header.producer_id)
    return updated, completed, None
