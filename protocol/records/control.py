"""Control records: the key/value layouts of transaction markers and KRaft control types."""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final, Optional

from protocol.exceptions import CorruptRecordError

CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2  # KRaft metadata log only
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def encode_control_key(control_type: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def parse_control_type(key: Optional[bytes]) -> Optional[ControlRecordType]:
    """The type named by a control record key, or None for a type this code does not know.

    Readers skip unknown types, as Kafka's do; a key too short to hold a type is corrupt.
    """
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key must be at least {_KEY.size} bytes")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has invalid version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return None


class EndTransactionMarker:
    """A COMMIT or ABORT marker, the one record of a transaction-marker control batch."""

    __slots__ = ("control_type", "coordinator_epoch")

    def __init__(self, control_type: ControlRecordType, coordinator_epoch: int) -> None:
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"{control_type!r} is not a transaction marker type")
        self.control_type = ControlRecordType(control_type)
        self.coordinator_epoch = coordinator_epoch

    @property
    def is_commit(self) -> bool:
        return self.control_type is ControlRecordType.COMMIT

    def encode_key(self) -> bytes:
        return encode_control_key(self.control_type)

    def encode_value(self) -> bytes:
        return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def decode(cls, key: Optional[bytes], value: Optional[bytes]) -> EndTransactionMarker:
        """Parse a marker record; newer value versions are read by their v0 prefix, as Kafka does."""
        control_type = parse_control_type(key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise CorruptRecordError(f"control record of type {control_type!r} is not a transaction marker")
        if value is None or len(value) < _END_TXN_VALUE.size:
            raise CorruptRecordError(
                f"transaction marker value must be at least {_END_TXN_VALUE.size} bytes"
            )
        version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"transaction marker has invalid version {version}")
        return cls(control_type, coordinator_epoch)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EndTransactionMarker):
            return NotImplemented
        return (self.control_type, self.coordinator_epoch) == (other.control_type, other.coordinator_epoch)

    def __repr__(self) -> str:
        return f"EndTransactionMarker({self.control_type.name}, coordinator_epoch={self.coordinator_epoch})"
