"""Replica placement for new topics and partitions, with Kafka's AdminUtils algorithm.

Goals (as in Kafka): spread replicas evenly over brokers; for the partitions led by one broker,
spread their followers over the other brokers; with racks, put each replica of a partition on a
different rack where possible, using a broker list that alternates racks.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

from coordination.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

BrokerRacks = Sequence[tuple[int, str | None]]


def assign_replicas_to_brokers(
    brokers: BrokerRacks,
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """partition -> replicas (the first is the preferred leader) for `brokers` as (id, rack)."""
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    rng = rng or random.Random()
    ordered = sorted(brokers)
    if all(rack is None for _, rack in ordered):
        return _assign_rack_unaware(
            num_partitions, replication_factor, [b for b, _ in ordered], fixed_start_index, start_partition_id, rng
        )
    if any(rack is None for _, rack in ordered):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _assign_rack_aware(
        num_partitions, replication_factor, {b: r for b, r in ordered if r is not None},
        fixed_start_index, start_partition_id, rng,
    )


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _assign_rack_unaware(
    num_partitions: int,
    replication_factor: int,
    broker_list: list[int],
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    result = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        replicas = [broker_list[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_list[_replica_index(first, next_replica_shift, j, n)])
        result[partition_id] = replicas
        partition_id += 1
    return result


def rack_alternated_broker_list(broker_racks: dict[int, str]) -> list[int]:
    """Brokers ordered rack by rack in round robin (racks sorted, brokers sorted within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack)
    iterators = {rack: iter(by_rack[rack]) for rack in racks}
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_racks):
        broker = next(iterators[racks[rack_index]], None)
        if broker is not None:
            result.append(broker)
        rack_index = (rack_index + 1) % len(racks)
    return result


def _assign_rack_aware(
    num_partitions: int,
    replication_factor: int,
    broker_racks: dict[int, str],
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    result = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, next_replica_shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none, and a
                # broker that already has one while some broker has none.
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        result[partition_id] = replicas
        partition_id += 1
    return result


def assignment_for_new_partitions(
    brokers: BrokerRacks,
    existing: dict[int, Sequence[int]],
    new_partition_count: int,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replicas for the partitions added when a topic grows to `new_partition_count` (Kafka's
    AdminZkClient.createNewPartitionsAssignment: continue the pattern of partition 0)."""
    if 0 not in existing:
        raise InvalidPartitionsError("the topic has no partition 0 to extend from")
    to_add = new_partition_count - len(existing)
    if to_add <= 0:
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. Topic currently has "
            f"{len(existing)} partitions, {new_partition_count} would not be an increase."
        )
    partition0 = list(existing[0])
    ids = sorted(b for b, _ in brokers)
    start_index = next((i for i, b in enumerate(ids) if b >= partition0[0]), -1)
    return assign_replicas_to_brokers(
        brokers, to_add, len(partition0), max(0, start_index), len(existing), rng
    )


def validate_manual_assignment(
    assignment: dict[int, Sequence[int]], live_brokers: set[int], expected_partitions: Sequence[int]
) -> None:
    """Checks of a client-supplied assignment (Kafka's AdminZkClient.validateReplicaAssignment)."""
    if sorted(assignment) != sorted(expected_partitions):
        raise InvalidReplicaAssignmentError(
            "Unexpected existing replica assignment for topic: partitions must be consecutive "
            f"from {min(expected_partitions, default=0)}."
        )
    factors = {len(replicas) for replicas in assignment.values()}
    for partition, replicas in assignment.items():
        if not replicas:
            raise InvalidReplicationFactorError(f"Replication factor must be larger than 0 for partition {partition}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: {list(replicas)}")
        unknown = set(replicas) - live_brokers
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, sorted(unknown)))}."
            )
    if len(factors) > 1:
        raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
