"""Typed storage errors; each names the Kafka error code the broker answers with.

``error_name`` is the member name in ``protocol.errors.Errors``, so the broker maps an
exception with ``Errors[exc.error_name]`` without storage importing the protocol layer.
"""

from __future__ import annotations

from typing import ClassVar


class StorageError(Exception):
    """Base class; unexpected storage failures surface as KAFKA_STORAGE_ERROR."""

    error_name: ClassVar[str] = "KAFKA_STORAGE_ERROR"


class KafkaStorageError(StorageError):
    """An I/O error (disk full, failing device) on a log dir, which is offline from then on."""


class LogDirNotFoundError(StorageError):
    """A path that is not one of the broker's ``log.dirs`` (AlterReplicaLogDirs)."""

    error_name = "LOG_DIR_NOT_FOUND"


class CorruptIndexError(StorageError):
    """An index file fails its sanity check; the loader rebuilds it from the .log."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot with a bad version, size or CRC; it is deleted and rebuilt."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file that does not parse (wrong version, count or line)."""


class InvalidOffsetError(StorageError):
    """An index append that would break the strictly increasing order of entries."""


class IndexOffsetOverflowError(StorageError):
    """An offset that cannot be stored relative to the segment's base offset as int32."""


class OffsetOutOfRangeError(StorageError):
    error_name = "OFFSET_OUT_OF_RANGE"


class CorruptRecordStorageError(StorageError):
    """A batch with a bad CRC or framing offered for append."""

    error_name = "CORRUPT_MESSAGE"


class InvalidRecordError(StorageError):
    error_name = "INVALID_RECORD"


class RecordTooLargeError(StorageError):
    """A batch above max.message.bytes."""

    error_name = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(StorageError):
    """An append larger than a whole segment (segment.bytes)."""

    error_name = "RECORD_LIST_TOO_LARGE"


class StaleLeaderEpochError(StorageError):
    """A leader append decided under an older leader epoch than the log's latest: the leadership
    changed while it waited for the log (an append on the I/O threads racing a LeaderAndIsr). As
    Kafka answers an append that finds the partition's leadership gone, the producer retries."""

    error_name = "NOT_LEADER_OR_FOLLOWER"


class OutOfOrderSequenceError(StorageError):
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    error_name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(StorageError):
    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(StorageError):
    error_name = "TRANSACTION_COORDINATOR_FENCED"


class InvalidConfigError(StorageError):
    error_name = "INVALID_CONFIG"


class LogCleaningAbortedError(StorageError):
    """A cleaning that must stop: its log was truncated, deleted or paused meanwhile."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""
