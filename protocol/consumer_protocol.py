"""The consumer's embedded protocol: ConsumerProtocolSubscription and ConsumerProtocolAssignment,
the bytes a classic consumer puts in JoinGroup's protocol metadata and SyncGroup's assignment
(an int16 version, then the message at that version; newer versions are read as the newest known,
extra bytes left, as Kafka's ConsumerProtocol reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.coordinator_record_codec import INT16
from protocol.exceptions import ProtocolError
from protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

MAX_VERSION = 3


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None


def decode_subscription(data: bytes) -> Subscription:
    if len(data) < 2:
        raise ProtocolError("ConsumerProtocolSubscription is shorter than its version")
    version = min(INT16.unpack_from(data)[0], MAX_VERSION)
    if version < 0:
        raise ProtocolError(f"ConsumerProtocolSubscription has version {version}")
    message, _ = ConsumerProtocolSubscription.decode_from(memoryview(data), 2, version)
    owned = {tp.topic: frozenset(tp.partitions) for tp in (message.owned_partitions or ()) if tp.partitions}
    return Subscription(tuple(message.topics), owned, message.rack_id if version >= 3 else None)


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    message = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=sorted(ps))
        for topic, ps in sorted(partitions.items())])
    return INT16.pack(version) + bytes(message.encode(version))


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    if not data:
        return {}
    version = min(INT16.unpack_from(data)[0], MAX_VERSION)
    message, _ = ConsumerProtocolAssignment.decode_from(memoryview(data), 2, version)
    return {tp.topic: frozenset(tp.partitions) for tp in message.assigned_partitions if tp.partitions}
