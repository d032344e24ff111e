from __future__ import annotations

import pytest

from broker.admin.topic_validation import check_new_topic, check_partition_increase
from coordination.model import ReplicaAssignment
from protocol.errors import Errors, KafkaApiError

EXISTING = {0: ReplicaAssignment((0,)), 1: ReplicaAssignment((1,))}


@pytest.mark.parametrize(
    ("existing", "count", "assignments", "error", "message"),
    [
        (None, 3, None, Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 't' does not exist."),
        (EXISTING, 1, None, Errors.INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1."),
        (EXISTING, 2, None, Errors.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        (EXISTING, 3, [[7]], Errors.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 7."),
        (EXISTING, 4, [[0]], Errors.INVALID_REPLICA_ASSIGNMENT, "Increasing the number of partitions by 2 but 1 assignments provided."),
        ({0: ReplicaAssignment((0, 1), adding_replicas=(1,))}, 2, None, Errors.REASSIGNMENT_IN_PROGRESS,
         "A partition reassignment is in progress for the topic 't'."),
    ],
)
def test_partition_increase_errors(existing, count, assignments, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaApiError) as info:
        check_partition_increase("t", existing, count, assignments, {0, 1})
    assert (info.value.error, info.value.message) == (error, message)


def test_partition_increase_ok() -> None:
    check_partition_increase("t", EXISTING, 4, [[0], [1]], {0, 1})
    check_partition_increase("t", EXISTING, 3, None, {0, 1})


def test_new_topic_field_checks() -> None:
    check_new_topic(-1, -1, True, [])
    check_new_topic(3, 1, False, [])
    with pytest.raises(KafkaApiError, match="Both numPartitions"):
        check_new_topic(3, -1, True, [])
    with pytest.raises(KafkaApiError, match="Null value not supported for topic configs : a,b"):
        check_new_topic(1, 1, False, ["a", "b"])
