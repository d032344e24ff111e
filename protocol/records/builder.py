"""Build record batches (magic 2) and legacy message sets (magic 0/1) from records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from protocol.records.batch import (
    CONTROL_FLAG_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    update_crc,
)
from protocol.records.compression import CompressionType, compress, compression_type
from protocol.records.control import EndTransactionMarker
from protocol.records.legacy import MESSAGE_OVERHEAD, LegacyRecord, build_message_set
from protocol.records.record import BytesLike, Header, encode_record

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class RecordBatchBuilder:
    """Accumulates records and writes one batch (or legacy message set) with a correct header.

    For magic 2: baseTimestamp is the first record's timestamp, maxTimestamp the
    largest (or ``log_append_time`` under LogAppendTime), lastOffsetDelta the
    last appended offset minus ``base_offset``; the CRC-32C is computed last.
    """

    def __init__(
        self,
        magic: int = 2,
        compression: int = CompressionType.NONE,
        base_offset: int = 0,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: int = CREATE_TIME,
        log_append_time: int = NO_TIMESTAMP,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        if magic not in (0, 1, 2):
            raise ValueError(f"unknown magic {magic}")
        self.compression = compression_type(compression)
        if magic < 2 and (
            self.compression is CompressionType.ZSTD
            or is_transactional
            or is_control
            or producer_id != NO_PRODUCER_ID
        ):
            raise ValueError(f"magic {magic} supports neither zstd nor producer ids, transactions, control")
        if timestamp_type == LOG_APPEND_TIME and (magic == 0 or log_append_time == NO_TIMESTAMP):
            raise ValueError("LogAppendTime needs magic >= 1 and a log_append_time")
        self.magic = magic
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.partition_leader_epoch = partition_leader_epoch
        self._records: list[bytes] = []  # v2 encoded records
        self._legacy: list[LegacyRecord] = []
        self._uncompressed_size = 0
        self._first_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP
        self._last_offset = base_offset - 1

    @property
    def record_count(self) -> int:
        return len(self._records) + len(self._legacy)

    @property
    def uncompressed_size(self) -> int:
        """Bytes of the records so far, before compression and without the batch header."""
        return self._uncompressed_size

    def append(
        self,
        timestamp: int,
        key: Optional[BytesLike],
        value: Optional[BytesLike],
        headers: Iterable[Header] = (),
        *,
        offset: Optional[int] = None,
    ) -> int:
        """Add a record at ``offset`` (default: the next one); returns the offset used."""
        if offset is None:
            offset = self._last_offset + 1
        elif offset <= self._last_offset:
            raise ValueError(f"offset {offset} must be above {self._last_offset} (and not below the base offset)")
        if not self.record_count:
            self._first_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_offset = offset
        if self.magic == 2:
            encoded = encode_record(offset - self.base_offset, timestamp - self._first_timestamp, key, value, headers)
            self._records.append(encoded)
            self._uncompressed_size += len(encoded)
        else:
            if next(iter(headers), None) is not None:
                raise ValueError(f"magic {self.magic} messages cannot carry headers")
            key_bytes = None if key is None else bytes(key)
            value_bytes = None if value is None else bytes(value)
            self._legacy.append((offset, timestamp if self.magic == 1 else NO_TIMESTAMP, key_bytes, value_bytes))
            self._uncompressed_size += (
                LOG_OVERHEAD + MESSAGE_OVERHEAD[self.magic] + len(key_bytes or b"") + len(value_bytes or b"")
            )
        return offset

    def build(self) -> bytearray:
        """The finished bytes; empty when nothing was appended (as Kafka's builder)."""
        if self.magic < 2:
            append_time = self.log_append_time if self.timestamp_type == LOG_APPEND_TIME else None
            return build_message_set(self.magic, self.compression, self.base_offset, self._legacy, append_time)
        if not self._records:
            return bytearray()
        data = b"".join(self._records)
        if self.compression is not CompressionType.NONE:
            data = compress(self.compression, data)
        attributes = self.compression
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
            max_timestamp = self.log_append_time
        else:
            max_timestamp = self._max_timestamp
        if self.is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.is_control:
            attributes |= CONTROL_FLAG_MASK
        out = bytearray(RECORD_BATCH_OVERHEAD + len(data))
        HEADER_STRUCT.pack_into(
            out,
            0,
            self.base_offset,
            len(out) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            2,
            0,
            attributes,
            self._last_offset - self.base_offset,
            self._first_timestamp,
            max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            len(self._records),
        )
        out[RECORD_BATCH_OVERHEAD:] = data
        update_crc(out, 0)
        return out


def build_control_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """A transaction-marker batch: transactional + control, one record, baseSequence -1."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp, marker.encode_key(), marker.encode_value())
    return builder.build()
