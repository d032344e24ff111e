"""Keys and values of __consumer_offsets records (the classic group coordinator's log).

Kafka writes OffsetCommitKey v0/v1 with OffsetCommitValue v0-v4 and GroupMetadataKey v2 with
GroupMetadataValue v0-v4 (schemas in Kafka's group-coordinator ``*.json``; v4 of both values is
flexible). This module decodes and encodes exactly those versions so the Spark job and
the broker's group coordinator share one implementation. Every value is read by its version
prefix; a newer value version than known is rejected, as Kafka does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional, Union

from protocol.exceptions import ProtocolError
from protocol.wire import read_uvarint, uvarint_size, write_uvarint

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
MAX_OFFSET_COMMIT_VALUE_VERSION = 4
MAX_GROUP_METADATA_VALUE_VERSION = 4
FLEXIBLE_VALUE_VERSION = 4

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


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


class _Reader:
    """A cursor over one key or value; every short read becomes a ProtocolError."""

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _take(self, size: int) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.buf):
            raise ProtocolError(f"{self.what} is truncated at byte {start} (needs {size} more)")
        self.pos = start + size
        return start

    def int16(self) -> int:
        return _INT16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack_from(self.buf, self._take(8))[0]

    def _length(self, compact: bool) -> int:
        if compact:
            value, self.pos = self._uvarint()
            return value - 1
        return self.int16()

    def array_length(self, compact: bool) -> int:
        if compact:
            value, self.pos = self._uvarint()
            return value - 1
        return self.int32()

    def _uvarint(self) -> tuple[int, int]:
        try:
            return read_uvarint(self.buf, self.pos)
        except ProtocolError as exc:
            raise ProtocolError(f"{self.what}: {exc}") from exc

    def string(self, compact: bool, nullable: bool = False) -> Optional[str]:
        length = self._length(compact)
        if length < 0:
            if nullable:
                return None
            raise ProtocolError(f"{self.what} has a null string where none is allowed (byte {self.pos})")
        start = self._take(length)
        try:
            return self.buf[start : start + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.what} has a string that is not UTF-8 at byte {start}") from exc

    def bytes_(self, compact: bool) -> bytes:
        length = self.array_length(compact)
        if length < 0:
            raise ProtocolError(f"{self.what} has null bytes where none are allowed (byte {self.pos})")
        start = self._take(length)
        return bytes(self.buf[start : start + length])

    def skip_tagged_fields(self) -> None:
        count, self.pos = self._uvarint()
        for _ in range(count):
            _tag, self.pos = self._uvarint()
            size, self.pos = self._uvarint()
            self._take(size)


def is_classic_group_key(key: bytes) -> bool:
    """Whether the key is one this module decodes (newer coordinators add other record types)."""
    return len(key) >= 2 and _INT16.unpack_from(key)[0] in (*OFFSET_COMMIT_KEY_VERSIONS, GROUP_METADATA_KEY_VERSION)


def decode_key(key: bytes) -> GroupKey:
    """OffsetCommitKey (versions 0, 1) or GroupMetadataKey (version 2)."""
    reader = _Reader(key, "__consumer_offsets key")
    version = reader.int16()
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        group = reader.string(False)
        topic = reader.string(False)
        return OffsetCommitKey(group, topic, reader.int32(), version)  # type: ignore[arg-type]
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string(False), version)  # type: ignore[arg-type]
    raise ProtocolError(f"__consumer_offsets key has unknown version {version}")


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    reader = _Reader(value, "OffsetCommitValue")
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
    reader = _Reader(value, "GroupMetadataValue")
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


def _decode_member(reader: _Reader, version: int, flexible: bool) -> MemberMetadata:
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


def encode_uvarint(value: int) -> bytes:
    out = bytearray(uvarint_size(value))
    write_uvarint(out, 0, value)
    return bytes(out)


def _string(value: Optional[str], compact: bool) -> bytes:
    if value is None:
        return encode_uvarint(0) if compact else _INT16.pack(-1)
    data = value.encode("utf-8")
    return (encode_uvarint(len(data) + 1) if compact else _INT16.pack(len(data))) + data


def _bytes(value: bytes, compact: bool) -> bytes:
    return (encode_uvarint(len(value) + 1) if compact else _INT32.pack(len(value))) + value


def encode_key(key: GroupKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return (
            _INT16.pack(key.version) + _string(key.group, False) + _string(key.topic, False) + _INT32.pack(key.partition)
        )
    return _INT16.pack(key.version) + _string(key.group, False)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = value.version
    flexible = version >= FLEXIBLE_VALUE_VERSION
    out = [_INT16.pack(version), _INT64.pack(value.offset)]
    if version >= 3:
        out.append(_INT32.pack(value.leader_epoch))
    out += [_string(value.metadata, flexible), _INT64.pack(value.commit_timestamp)]
    if version == 1:
        out.append(_INT64.pack(value.expire_timestamp))
    if flexible:
        out.append(encode_uvarint(0))
    return b"".join(out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    version = value.version
    flexible = version >= FLEXIBLE_VALUE_VERSION
    out = [
        _INT16.pack(version),
        _string(value.protocol_type, flexible),
        _INT32.pack(value.generation),
        _string(value.protocol, flexible),
        _string(value.leader, flexible),
    ]
    if version >= 2:
        out.append(_INT64.pack(value.current_state_timestamp))
    out.append(encode_uvarint(len(value.members) + 1) if flexible else _INT32.pack(len(value.members)))
    for member in value.members:
        out.append(_string(member.member_id, flexible))
        if version >= 3:
            out.append(_string(member.group_instance_id, flexible))
        out += [_string(member.client_id, flexible), _string(member.client_host, flexible)]
        if version >= 1:
            out.append(_INT32.pack(member.rebalance_timeout))
        out += [_INT32.pack(member.session_timeout), _bytes(member.subscription, flexible), _bytes(member.assignment, flexible)]
        if flexible:
            out.append(encode_uvarint(0))
    if flexible:
        out.append(encode_uvarint(0))
    return b"".join(out)
