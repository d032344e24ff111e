"""Keys and values of ``__transaction_state`` records (the transaction coordinator's log).

Kafka's TransactionLogKey (version 0: the transactional id) and TransactionLogValue (version 0,
which a 3.9 broker writes; version 1 is the flexible form of the same fields, written only once
the ``transaction.version`` feature is finalized, which a ZooKeeper cluster never does). Both are
decoded here so the broker and offline readers share one implementation. A key of another
version is not a transaction record (Kafka skips it on load); a value of an unknown version is
refused, as Kafka refuses it. A null value is a tombstone: the transactional id expired.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from protocol.coordinator_record_codec import (
    INT8,
    INT16,
    INT32,
    INT64,
    RecordReader,
    encode_array_length,
    encode_string,
    encode_uvarint,
)
from protocol.exceptions import ProtocolError

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 0  # what a 3.9 broker writes
MAX_TRANSACTION_LOG_VALUE_VERSION = 1
FLEXIBLE_VALUE_VERSION = 1


@dataclass(frozen=True)
class TransactionLogKey:
    transactional_id: str
    version: int = TRANSACTION_LOG_KEY_VERSION


@dataclass(frozen=True)
class PartitionsSchema:
    topic: str
    partition_ids: list[int]


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int  # TransactionState id: 0 Empty ... 7 PrepareEpochFence
    transaction_partitions: Optional[list[PartitionsSchema]] = field(default=None)  # null in Empty
    transaction_last_update_timestamp_ms: int = -1
    transaction_start_timestamp_ms: int = -1
    version: int = TRANSACTION_LOG_VALUE_VERSION


def encode_key(key: TransactionLogKey) -> bytes:
    return INT16.pack(key.version) + encode_string(key.transactional_id, False)


def decode_key(key: bytes) -> Optional[TransactionLogKey]:
    """The key, or None when its version is not a transaction log key's (Kafka's UnknownKey)."""
    reader = RecordReader(key, "__transaction_state key")
    version = reader.int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        return None
    return TransactionLogKey(reader.string(False), version)  # type: ignore[arg-type]


def encode_value(value: TransactionLogValue) -> bytes:
    version = value.version
    if not 0 <= version <= MAX_TRANSACTION_LOG_VALUE_VERSION:
        raise ValueError(f"TransactionLogValue has no version {version}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    partitions = value.transaction_partitions
    out = [INT16.pack(version), INT64.pack(value.producer_id), INT16.pack(value.producer_epoch),
           INT32.pack(value.transaction_timeout_ms), INT8.pack(value.transaction_status),
           encode_array_length(None if partitions is None else len(partitions), flexible)]
    for entry in partitions or ():
        out += [encode_string(entry.topic, flexible), encode_array_length(len(entry.partition_ids), flexible),
                b"".join(INT32.pack(p) for p in entry.partition_ids)]
        if flexible:
            out.append(encode_uvarint(0))
    out += [INT64.pack(value.transaction_last_update_timestamp_ms), INT64.pack(value.transaction_start_timestamp_ms)]
    if flexible:
        out.append(encode_uvarint(0))
    return b"".join(out)


def decode_value(value: bytes) -> TransactionLogValue:
    reader = RecordReader(value, "TransactionLogValue")
    version = reader.int16()
    if not 0 <= version <= MAX_TRANSACTION_LOG_VALUE_VERSION:
        raise ProtocolError(f"TransactionLogValue has unknown version {version}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    producer_id, producer_epoch = reader.int64(), reader.int16()
    timeout_ms, status = reader.int32(), reader.int8()
    count = reader.array_length(flexible)
    partitions: Optional[list[PartitionsSchema]] = None
    if count >= 0:
        partitions = []
        for _ in range(count):
            topic = reader.string(flexible)
            ids_count = reader.array_length(flexible)
            if ids_count < 0:
                raise ProtocolError("TransactionLogValue has a null partition id array")
            partitions.append(PartitionsSchema(topic, [reader.int32() for _ in range(ids_count)]))  # type: ignore[arg-type]
            if flexible:
                reader.skip_tagged_fields()
    last_update, start = reader.int64(), reader.int64()
    if flexible:
        reader.skip_tagged_fields()
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, status, partitions, last_update, start,
                               version)
