"""Keys and values of __consumer_offsets records (the classic group coordinator's log).

Kafka writes OffsetCommitKey v0/v1 with OffsetCommitValue v0-v4 and GroupMetadataKey v2 with
GroupMetadataValue v0-v4 (schemas in Kafka's group-coordinator ``*.json``; v4 of both values is
flexible). This module decodes and encodes exactly those versions so the Spark job and
the broker's group coordinator share one implementation. Every value is read by its version
prefix; a newer value version than known is rejected, as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from protocol.coordinator_record_codec import (
    INT16,
    INT32,
    INT64,
    RecordReader,
    encode_bytes,
    encode_string,
    encode_uvarint,
)
from protocol.exceptions import ProtocolError

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
MAX_OFFSET_COMMIT_VALUE_VERSION = 4
MAX_GROUP_METADATA_VALUE_VERSION = 4
FLEXIBLE_VALUE_VERSION = 4


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = 1


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    version: int = 3


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: Optional[str] = None


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: Optional[str]
    leader: Optional[str]
    members: list[MemberMetadata] = field(default_factory=list)
    current_state_timestamp: int = -1
    version: int = 3


GroupKey = Union[OffsetCommitKey, GroupMetadataKey]


def is_classic_group_key(key: bytes) -> bool:
    """Whether the key is one this module decodes (newer coordinators add other record types)."""
    return len(key) >= 2 and INT16.unpack_from(key)[0] in (*OFFSET_COMMIT_KEY_VERSIONS, GROUP_METADATA_KEY_VERSION)


def decode_key(key: bytes) -> GroupKey:
    """OffsetCommitKey (versions 0, 1) or GroupMetadataKey (version 2)."""
    reader = RecordReader(key, "__consumer_offsets key")
    version = reader.int16()
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        group = reader.string(False)
        topic = reader.string(False)
        return OffsetCommitKey(group, topic, reader.int32(), version)  # type: ignore[arg-type]
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string(False), version)  # type: ignore[arg-type]
    raise ProtocolError(f"__consumer_offsets key has unknown version {version}")


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    reader = RecordReader(value, "OffsetCommitValue")
    version = reader.int16()
    if not 0 <= version <= MAX_OFFSET_COMMIT_VALUE_VERSION:
        raise ProtocolError(f"OffsetCommitValue has unknown version {version}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string(flexible)
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    if flexible:
        reader.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp, version)  # type: ignore[arg-type]


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    reader = RecordReader(value, "GroupMetadataValue")
    version = reader.int16()
    if not 0 <= version <= MAX_GROUP_METADATA_VALUE_VERSION:
        raise ProtocolError(f"GroupMetadataValue has unknown version {version}")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    protocol_type = reader.string(flexible)
    generation = reader.int32()
    protocol = reader.string(flexible, nullable=True)
    leader = reader.string(flexible, nullable=True)
    current_state_timestamp = reader.int64() if version >= 2 else -1
    count = reader.array_length(flexible)
    if count < 0:
        raise ProtocolError("GroupMetadataValue has a null member array")
    members = [_decode_member(reader, version, flexible) for _ in range(count)]
    if flexible:
        reader.skip_tagged_fields()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, members, current_state_timestamp, version  # type: ignore[arg-type]
    )


def _decode_member(reader: RecordReader, version: int, flexible: bool) -> MemberMetadata:
    member_id = reader.string(flexible)
    group_instance_id = reader.string(flexible, nullable=True) if version >= 3 else None
    client_id = reader.string(flexible)
    client_host = reader.string(flexible)
    rebalance_timeout = reader.int32() if version >= 1 else -1
    session_timeout = reader.int32()
    subscription = reader.bytes_(flexible)
    assignment = reader.bytes_(flexible)
    if flexible:
        reader.skip_tagged_fields()
    return MemberMetadata(
        member_id, client_id, client_host, session_timeout, subscription, assignment,  # type: ignore[arg-type]
        rebalance_timeout, group_instance_id,
    )


# --- encoding (tests, and the group coordinator when it writes its log) ------------------------


def encode_key(key: GroupKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return (
            INT16.pack(key.version) + encode_string(key.group, False) + encode_string(key.topic, False) + INT32.pack(key.partition)
        )
    return INT16.pack(key.version) + encode_string(key.group, False)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = value.version
    flexible = version >= FLEXIBLE_VALUE_VERSION
    out = [INT16.pack(version), INT64.pack(value.offset)]
    if version >= 3:
        out.append(INT32.pack(value.leader_epoch))
    out += [encode_string(value.metadata, flexible), INT64.pack(value.commit_timestamp)]
    if version == 1:
        out.append(INT64.pack(value.expire_timestamp))
    if flexible:
        out.append(encode_uvarint(0))
    return b"".join(out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    version = value.version
    flexible = version >= FLEXIBLE_VALUE_VERSION
    out = [
        INT16.pack(version),
        encode_string(value.protocol_type, flexible),
        INT32.pack(value.generation),
        encode_string(value.protocol, flexible),
        encode_string(value.leader, flexible),
    ]
    if version >= 2:
        out.append(INT64.pack(value.current_state_timestamp))
    out.append(encode_uvarint(len(value.members) + 1) if flexible else INT32.pack(len(value.members)))
    for member in value.members:
        out.append(encode_string(member.member_id, flexible))
        if version >= 3:
            out.append(encode_string(member.group_instance_id, flexible))
        out += [encode_string(member.client_id, flexible), encode_string(member.client_host, flexible)]
        if version >= 1:
            out.append(INT32.pack(member.rebalance_timeout))
        out += [INT32.pack(member.session_timeout), encode_bytes(member.subscription, flexible), encode_bytes(member.assignment, flexible)]
        if flexible:
            out.append(encode_uvarint(0))
    if flexible:
        out.append(encode_uvarint(0))
    return b"".join(out)
