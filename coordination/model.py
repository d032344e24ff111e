"""The values Kafka keeps in ZooKeeper, as plain immutable types (no I/O, no JSON)."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import NamedTuple

NO_LEADER = -1
# LeaderAndIsr.initialLeaderEpoch / initialPartitionEpoch in Kafka.
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def random_uuid_b64() -> str:
    """A Kafka `Uuid.randomUuid()` string: 16 random bytes, base64url without padding (22 chars).

    Kafka re-draws ids whose text starts with '-' (they look like command-line flags) and the
    reserved all-zero / metadata-topic ids.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-") and text not in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):
            return text


def uuid_from_b64(text: str) -> uuid.UUID:
    """Parse a Kafka base64url Uuid string (as stored in ZooKeeper) into a UUID."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a 16-byte base64url uuid: {text!r}")
    return uuid.UUID(bytes=raw)


class SecurityProtocol(IntEnum):
    """Kafka's SecurityProtocol ids (sent in UpdateMetadata endpoints)."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


@dataclass(frozen=True)
class BrokerEndPoint:
    listener: str
    host: str
    port: int
    security_protocol: SecurityProtocol

    @property
    def connection_string(self) -> str:
        """`LISTENER://host:port`, IPv6 hosts in brackets, as in the broker znode's `endpoints`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerInfo:
    """A broker registration (/brokers/ids/<id>); `epoch` is the znode's czxid, -1 before reading."""

    broker_id: int
    endpoints: tuple[BrokerEndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    epoch: int = -1

    def endpoint(self, listener: str) -> BrokerEndPoint | None:
        return next((ep for ep in self.endpoints if ep.listener == listener), None)

    def with_epoch(self, epoch: int) -> BrokerInfo:
        return replace(self, epoch=epoch)


class LeaderRecoveryState(IntEnum):
    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True)
class LeaderAndIsr:
    """One partition's `state` znode; `partition_epoch` is that znode's zkVersion."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def new_leader_and_isr(
        self,
        leader: int,
        isr: tuple[int, ...] | list[int],
        recovery: LeaderRecoveryState | None = None,
    ) -> LeaderAndIsr:
        """Next leader epoch with a new leader and ISR (every leader change bumps the epoch)."""
        return replace(
            self,
            leader=leader,
            leader_epoch=self.leader_epoch + 1,
            isr=tuple(isr),
            leader_recovery_state=self.leader_recovery_state if recovery is None else recovery,
        )

    def new_epoch(self) -> LeaderAndIsr:
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return replace(self, partition_epoch=partition_epoch)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas, plus the KIP-455 reassignment still in flight."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @staticmethod
    def for_reassignment(current: tuple[int, ...], target: tuple[int, ...]) -> ReplicaAssignment:
        """Kafka's ReplicaAssignment.reassignTo: target first, then the replicas being removed."""
        full = tuple(target) + tuple(r for r in current if r not in target)
        return ReplicaAssignment(
            replicas=full,
            adding_replicas=tuple(r for r in target if r not in current),
            removing_replicas=tuple(r for r in current if r not in target),
        )


@dataclass(frozen=True)
class TopicAssignment:
    """The /brokers/topics/<topic> znode: topic id and per-partition assignment."""

    topic_id: str | None
    partitions: dict[int, ReplicaAssignment]


@dataclass(frozen=True)
class ProducerIdBlock:
    """An inclusive range of `size` producer ids owned by `broker_id`."""

    broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size
