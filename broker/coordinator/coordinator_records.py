"""Kafka's coordinator records in ``__consumer_offsets``, as Kafka 4 writes them for its new group kinds.

The key is an int16 record type followed by the key's fields at version 0, the value an int16
version followed by the value's fields (``None``: a tombstone); both are the generated codecs of
the definitions in ``protocol/schemas/records/``, named ``<Name>Key`` and ``<Name>Value``. The
consumer-group and share-group records build on these.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from protocol.coordinator_record_codec import INT16
from protocol.messages import message_class

Record = tuple[bytes, bytes | None]


def record_type(key: bytes) -> int:
    return INT16.unpack_from(key)[0] if len(key) >= 2 else -1


def encode_key(name: str, kind: int, **fields: Any) -> bytes:
    return INT16.pack(kind) + bytes(message_class(name + "Key")(**fields).encode(0))


def encode_value(name: str, **fields: Any) -> bytes:
    return INT16.pack(0) + bytes(message_class(name + "Value")(**fields).encode(0))


def decode_record(name: str, key: bytes, value: bytes | None) -> tuple[Any, Any]:
    """(key message, value message or None for a tombstone)."""
    decoded_key = message_class(name + "Key").decode(memoryview(key)[2:], 0)
    decoded_value = None if value is None else message_class(name + "Value").decode(memoryview(value)[2:], 0)
    return decoded_key, decoded_value


def topic_partitions(cls: Any, assignment: Mapping[uuid.UUID, Iterable[int]]) -> list[Any]:
    """An assignment as the records' TopicPartitions entries, in a stable order."""
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda i: str(i[0]))]
