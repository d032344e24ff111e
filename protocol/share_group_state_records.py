"""Keys and values of ``__share_group_state`` records (Kafka's share coordinator log, KIP-932).

Kafka 4.2's share-coordinator definitions: record type 0 is ShareSnapshotKey/ShareSnapshotValue
(the whole state of one share-partition), type 1 ShareUpdateKey/ShareUpdateValue (state batches
merged into the last snapshot). A key is the int16 record type and then GroupId, TopicId and
Partition (classic encoding); a value is its int16 version (0) and flexible fields, with
DeliveryCompleteCount (KIP-1226, Kafka 4.2) as tagged field 0 (-1 when absent).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

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

SNAPSHOT_RECORD_TYPE = 0
UPDATE_RECORD_TYPE = 1
VALUE_VERSION = 0
DELIVERY_COMPLETE_COUNT_TAG = 0


@dataclass(frozen=True)
class ShareStateKey:
    """ShareSnapshotKey (record type 0) or ShareUpdateKey (record type 1)."""

    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class PersistedBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: list[PersistedBatch] = field(default_factory=list)
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[PersistedBatch] = field(default_factory=list)
    delivery_complete_count: int = -1


def encode_key(key: ShareStateKey) -> bytes:
    return (INT16.pack(key.record_type) + encode_string(key.group_id, False) + key.topic_id.bytes
            + INT32.pack(key.partition))


def decode_key(data: bytes) -> ShareStateKey:
    reader = RecordReader(data, "__share_group_state key")
    record_type = reader.int16()
    if record_type not in (SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE):
        raise ProtocolError(f"__share_group_state key has unknown record type {record_type}")
    group_id = reader.string(False)
    start = reader._take(16)
    topic_id = uuid.UUID(bytes=bytes(reader.buf[start:start + 16]))
    return ShareStateKey(record_type, group_id, topic_id, reader.int32())  # type: ignore[arg-type]


def _encode_batches(batches: list[PersistedBatch]) -> list[bytes]:
    out = [encode_array_length(len(batches), True)]
    for b in batches:
        out += [INT64.pack(b.first_offset), INT64.pack(b.last_offset), INT8.pack(b.delivery_state),
                INT16.pack(b.delivery_count), encode_uvarint(0)]
    return out


def _encode_tags(delivery_complete_count: int) -> list[bytes]:
    if delivery_complete_count == -1:
        return [encode_uvarint(0)]
    return [encode_uvarint(1), encode_uvarint(DELIVERY_COMPLETE_COUNT_TAG), encode_uvarint(4),
            INT32.pack(delivery_complete_count)]


def encode_snapshot_value(value: ShareSnapshotValue) -> bytes:
    return b"".join([INT16.pack(VALUE_VERSION), INT32.pack(value.snapshot_epoch), INT32.pack(value.state_epoch),
                     INT32.pack(value.leader_epoch), INT64.pack(value.start_offset),
                     INT64.pack(value.create_timestamp), INT64.pack(value.write_timestamp),
                     *_encode_batches(value.state_batches), *_encode_tags(value.delivery_complete_count)])


def encode_update_value(value: ShareUpdateValue) -> bytes:
    return b"".join([INT16.pack(VALUE_VERSION), INT32.pack(value.snapshot_epoch), INT32.pack(value.leader_epoch),
                     INT64.pack(value.start_offset), *_encode_batches(value.state_batches),
                     *_encode_tags(value.delivery_complete_count)])


def _version(reader: RecordReader) -> None:
    version = reader.int16()
    if version != VALUE_VERSION:
        raise ProtocolError(f"{reader.what} has unknown version {version}")


def _batches(reader: RecordReader) -> list[PersistedBatch]:
    count = reader.array_length(True)
    if count < 0:
        raise ProtocolError(f"{reader.what} has a null StateBatches array")
    batches = []
    for _ in range(count):
        batches.append(PersistedBatch(reader.int64(), reader.int64(), reader.int8(), reader.int16()))
        reader.skip_tagged_fields()
    return batches


def _delivery_complete_count(reader: RecordReader) -> int:
    found = -1
    count, reader.pos = reader._uvarint()
    for _ in range(count):
        tag, reader.pos = reader._uvarint()
        size, reader.pos = reader._uvarint()
        start = reader._take(size)
        if tag == DELIVERY_COMPLETE_COUNT_TAG and size == 4:
            found = INT32.unpack_from(reader.buf, start)[0]
    return found


def decode_snapshot_value(data: bytes) -> ShareSnapshotValue:
    reader = RecordReader(data, "ShareSnapshotValue")
    _version(reader)
    snapshot_epoch, state_epoch, leader_epoch = reader.int32(), reader.int32(), reader.int32()
    start_offset, created, written = reader.int64(), reader.int64(), reader.int64()
    batches = _batches(reader)
    return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, created, written, batches,
                              _delivery_complete_count(reader))


def decode_update_value(data: bytes) -> ShareUpdateValue:
    reader = RecordReader(data, "ShareUpdateValue")
    _version(reader)
    snapshot_epoch, leader_epoch, start_offset = reader.int32(), reader.int32(), reader.int64()
    batches = _batches(reader)
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, _delivery_complete_count(reader))
