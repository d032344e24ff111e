"""Request checks Kafka makes in ZkAdminManager before it writes ZooKeeper (pure functions)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordination.model import ReplicaAssignment
from protocol.errors import Errors, KafkaApiError

NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
# /brokers/topics/<topic> holds the whole assignment and ZooKeeper refuses nodes over jute.maxbuffer
# (1 MiB by default); a partition takes at least 6 bytes there ('"0":[1],'), so no topic can have
# more. Checking first also keeps one request from making the broker compute billions of replicas.
MAX_PARTITIONS = (1 << 20) // 6


def check_partition_count(topic: str, count: int) -> None:
    if count > MAX_PARTITIONS:
        raise KafkaApiError(Errors.INVALID_PARTITIONS,
                            f"Topic '{topic}' cannot have {count} partitions: its assignment would not fit in "
                            f"ZooKeeper (at most {MAX_PARTITIONS} partitions).")


def check_new_topic(
    num_partitions: int,
    replication_factor: int,
    has_assignments: bool,
    null_configs: Sequence[str],
) -> None:
    """The CreateTopics field checks ahead of assignment (INVALID_REQUEST as in Kafka)."""
    if null_configs:
        raise KafkaApiError(
            Errors.INVALID_REQUEST, f"Null value not supported for topic configs : {','.join(null_configs)}"
        )
    if has_assignments and (num_partitions != NO_NUM_PARTITIONS or replication_factor != NO_REPLICATION_FACTOR):
        raise KafkaApiError(
            Errors.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time.",
        )


def check_partition_increase(
    topic: str,
    existing: Mapping[int, ReplicaAssignment] | None,
    new_count: int,
    assignments: Sequence[Sequence[int]] | None,
    live_broker_ids: set[int],
) -> None:
    """ZkAdminManager.createPartitions' checks, in its order and with its messages."""
    if existing and any(a.is_being_reassigned for a in existing.values()):
        raise KafkaApiError(
            Errors.REASSIGNMENT_IN_PROGRESS, f"A partition reassignment is in progress for the topic '{topic}'."
        )
    if not existing:
        raise KafkaApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    old = len(existing)
    increment = new_count - old
    if increment < 0:
        raise KafkaApiError(
            Errors.INVALID_PARTITIONS,
            f"Topic currently has {old} partitions, which is higher than the requested {new_count}.",
        )
    if increment == 0:
        raise KafkaApiError(Errors.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    check_partition_count(topic, new_count)
    if assignments is not None:
        unknown = {b for replicas in assignments for b in replicas} - live_broker_ids
        if unknown:
            raise KafkaApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, sorted(unknown)))}.",
            )
        if len(assignments) != increment:
            raise KafkaApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {increment} but {len(assignments)} assignments provided.",
            )
