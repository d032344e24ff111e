"""Replica assignment against examples from Kafka's AdminUtils documentation and tests."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from coordination.errors import InvalidPartitionsError, InvalidReplicationFactorError
from coordination.replica_assignment import (
    assign_replicas_to_brokers,
    assignment_for_new_partitions,
    rack_alternated_broker_list,
)


def test_rack_unaware_matches_kafka_doc_example() -> None:
    # Kafka's AdminUtils doc: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    brokers = [(b, None) for b in range(5)]
    assignment = assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0)
    assert assignment == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_rack_alternated_list_matches_kafka_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_puts_replicas_on_distinct_racks() -> None:
    brokers = [(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")]
    assignment = assign_replicas_to_brokers(brokers, 12, 3, rng=random.Random(7))
    rack = dict(brokers)
    for replicas in assignment.values():
        assert len({rack[b] for b in replicas}) == 3
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert set(leaders.values()) == {2}


def test_rack_aware_matches_kafka_test_case() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assignment = assign_replicas_to_brokers(list(racks.items()), 7, 3, fixed_start_index=0, start_partition_id=0)
    assert assignment == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]
    }


def test_errors() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers([(1, None), (2, None)], 1, 3)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers([(1, None)], 0, 1)


def test_new_partitions_continue_from_partition_zero() -> None:
    brokers = [(b, None) for b in range(3)]
    existing = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=0)
    added = assignment_for_new_partitions(brokers, existing, 6, rng=random.Random(1))
    assert sorted(added) == [3, 4, 5]
    assert all(len(replicas) == 2 and len(set(replicas)) == 2 for replicas in added.values())
    with pytest.raises(InvalidPartitionsError, match="can only be increased"):
        assignment_for_new_partitions(brokers, existing, 3)
