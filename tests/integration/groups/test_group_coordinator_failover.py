"""Coordinator failover on three brokers with offsets.topic.replication.factor=3.

DEPENDS ON REPLICATION (followers fetching from leaders): the committed offsets survive the
SIGKILL of the coordinator's broker only if its __consumer_offsets partition was replicated to
the broker that takes over. Until replication lands this test is expected to fail; it is kept
apart so that it can be run on its own once it has.
"""
from __future__ import annotations



from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import FindCoordinatorRequest, OffsetFetchRequest
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import (
    CONFLUENT_TIMEOUTS,
    produce,
    request,
    unique,
    wait_for_coordinator,
)

PARTITIONS = 3


def _coordinator_seen_by(broker: BrokerProcess, group: str) -> int | None:
    try:
        response = request(broker, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
    except OSError:
        return None
    return response.node_id if response.error_code == Errors.NONE else None


def _committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int] | None:
    try:
        response = request(broker, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(PARTITIONS)))]))
    except OSError:
        return None
    if response.error_code != Errors.NONE:
        return None
    return {p.partition_index: p.committed_offset for p in response.topics[0].partitions}


def test_group_finds_new_coordinator_and_keeps_offsets_after_sigkill(replicated_cluster: BrokerCluster) -> None:
    from confluent_kafka import Consumer, TopicPartition

    def consumer() -> Consumer:
        return Consumer({"bootstrap.servers": replicated_cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **CONFLUENT_TIMEOUTS})

    brokers = replicated_cluster.brokers
    topic, group = unique("t"), unique("g")
    brokers[0].create_topic(topic, PARTITIONS, replication_factor=3)
    coordinator_id = wait_for_coordinator(brokers[0], group, timeout=60)
    produce(replicated_cluster.bootstrap, topic, PARTITIONS, 4)

    first = consumer()
    try:
        first.subscribe([topic])
        seen: set[bytes] = set()

        def consumed() -> bool:
            message = first.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
            return len(seen) >= PARTITIONS * 4

        wait_for(consumed, "every message", 60)
        assert all(tp.error is None for tp in first.commit(asynchronous=False))
    finally:
        first.close()
    coordinator = brokers[coordinator_id]
    assert _committed(coordinator, group, topic) == {p: 4 for p in range(PARTITIONS)}

    coordinator.kill()
    survivors = [b for b in brokers if b is not coordinator]

    def moved() -> tuple[int] | None:  # a tuple: node 0 must count as found
        found = _coordinator_seen_by(survivors[0], group)
        return (found,) if found is not None and found != coordinator_id else None

    (new_id,) = wait_for(moved, "a new coordinator", 60)
    new_coordinator = brokers[new_id]
    assert wait_for(lambda: _committed(new_coordinator, group, topic), "the committed offsets", 60) == {
        p: 4 for p in range(PARTITIONS)}

    # A client finds the new coordinator by itself and sees the commits there.
    resumed = consumer()
    try:
        resumed.subscribe([topic])

        def assigned() -> bool:
            resumed.poll(0.2)
            return len(resumed.assignment()) == PARTITIONS

        wait_for(assigned, "the resumed consumer's assignment", 60)
        committed = resumed.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        resumed.close()
    assert {tp.partition: tp.offset for tp in committed} == {p: 4 for p in range(PARTITIONS)}
