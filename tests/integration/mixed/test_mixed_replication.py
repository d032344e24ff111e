"""Replication between real Kafka 3.9 brokers and ours, both ways.

One module-scoped cluster: brokers 0 and 2 are Kafka, 1 and 3 are ours. Followers of each kind
fetch from leaders of the other and end byte-identical to them; a follower of either kind that
diverged from its new leader truncates where Kafka's own would; a partition's leadership moves
between the kinds (controlled shutdown, preferred election, SIGKILL) under an idempotent acks=all
producer without losing an acknowledged message; and a consumer group's coordinator moves
between the kinds keeping the group's committed offsets.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from broker.coordinator.internal_topic import partition_for
from tests.harness.broker import BrokerProcess
from tests.harness.numbered_messages import NumberedProducer, check_exactly_once, read_all
from tests.integration.mixed.mixed_support import (
    MIXED_DEFAULTS, MixedCluster, StartMixed, consume_and_commit, create_topic, elect_preferred, find_coordinator,
    wait_for_full_isr, wait_for_identical_replicas, wait_for_leader,
)
from tests.integration.replication.replication_support import produce_raw

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mixed(start_mixed: StartMixed) -> Iterator[MixedCluster]:
    yield start_mixed("koko")


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_both_kinds_register_alike(mixed: MixedCluster) -> None:
    """/brokers/ids/<id> (version 5): the same fields with the same kinds of values, whoever wrote it."""
    reader = mixed.zk()
    try:
        registrations = {b.broker_id: json.loads(reader.client.get(f"/brokers/ids/{b.broker_id}")[0])
                         for b in mixed.brokers}
    finally:
        reader.close()
    for broker in mixed.brokers:
        value = registrations[broker.broker_id]
        host, port = broker.bootstrap.split(":")
        assert value.pop("timestamp").isdigit()
        assert value == {"version": 5, "host": host, "port": int(port), "jmx_port": -1,
                         "endpoints": [f"PLAINTEXT://{broker.bootstrap}"],
                         "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "features": {}}, \
            f"{broker!r} registered {value}"


def test_followers_of_each_kind_replicate_from_leaders_of_the_other(mixed: MixedCluster) -> None:
    topic = _topic("both-ways")
    # Leaders of both kinds, each with followers of both kinds.
    assignment = [[0, 1, 2], [1, 0, 3], [2, 3, 1], [3, 2, 0]]
    create_topic(mixed, topic, assignment, {"min.insync.replicas": "2"})
    producer = NumberedProducer(",".join(b.bootstrap for b in mixed.brokers), topic, len(assignment), rate=2000,
                                n=2000, **{"compression.type": "gzip", "batch.num.messages": 50})
    producer.start()
    producer.finish()
    check_exactly_once(producer, read_all(mixed.brokers[0].bootstrap, topic, len(assignment)))
    wait_for_full_isr(mixed, topic, len(assignment))
    for partition, replicas in enumerate(assignment):
        files = wait_for_identical_replicas(mixed, topic, partition, replicas)
        assert any(name.endswith(".log") and data for name, data in files.items())


@pytest.mark.parametrize("old_leader, new_leader", [(0, 1), (1, 2)], ids=["kafka-diverged", "ours-diverged"])
def test_a_diverged_follower_truncates_to_its_new_leader(mixed: MixedCluster, old_leader: int,
                                                         new_leader: int) -> None:
    """The old leader wrote a tail nobody copied, died, and comes back as a follower of the other
    kind whose log has other records at those offsets: it must cut its tail at the end of its
    last common epoch (Kafka's followers learn it from the Fetch response's diverging epoch,
    our followers ask OffsetsForLeaderEpoch), then copy the new leader's records."""
    topic = _topic("diverged")
    old, new = mixed.broker(old_leader), mixed.broker(new_leader)
    assert mixed.kind(old) != mixed.kind(new)
    create_topic(mixed, topic, [[old_leader, new_leader]])
    assert produce_raw(old, topic, [b"common-%d" % i for i in range(10)], acks=-1).error_code == 0
    new.pause()  # the follower stops copying: what the leader takes now only it has
    try:
        assert produce_raw(old, topic, [b"lost-%d" % i for i in range(5)], acks=1).error_code == 0
        old.kill()
    finally:
        new.resume()
    wait_for_leader(mixed, topic, 0, lambda leader: leader == new_leader, f"{new} leading {topic}")
    assert produce_raw(new, topic, [b"new-%d" % i for i in range(8)], acks=1).error_code == 0
    mixed.restart_after_kill(old)
    wait_for_full_isr(mixed, topic, 1)
    wait_for_identical_replicas(mixed, topic, 0, [new_leader, old_leader])


def test_leadership_moves_between_kinds_under_an_acks_all_producer(mixed: MixedCluster) -> None:
    """Controlled shutdown, preferred election and SIGKILL each move a leader from Kafka to ours
    and from ours to Kafka while an idempotent acks=all producer writes; nothing acknowledged is
    lost, nothing is written twice, and the replicas end byte-identical."""
    topic = _topic("moves")
    assignment = [[0, 1, 2], [1, 2, 3]]  # p0: Kafka, ours, Kafka; p1: ours, Kafka, ours
    create_topic(mixed, topic, assignment, {"min.insync.replicas": "2"})
    producer = NumberedProducer(",".join(b.bootstrap for b in mixed.brokers), topic, 2, rate=400)
    producer.start()
    try:
        producer.wait_for_progress(200)

        def moved(partition: int, to: int, how: str) -> None:
            wait_for_leader(mixed, topic, partition, lambda leader: leader == to,
                            f"{topic}-{partition} led by broker {to} after {how}")
            producer.wait_for_progress(200)

        def back(broker: BrokerProcess, killed: bool) -> None:
            if killed:
                mixed.restart_after_kill(broker)
            else:
                broker.start(60)
            wait_for_full_isr(mixed, topic, 2)

        mixed.broker(0).stop()  # controlled shutdown, Kafka -> ours
        moved(0, 1, "Kafka's controlled shutdown")
        back(mixed.broker(0), killed=False)
        elect_preferred(mixed, topic, [0])  # ours -> Kafka
        moved(0, 0, "a preferred election")
        mixed.broker(1).stop()  # controlled shutdown, ours -> Kafka
        moved(1, 2, "our controlled shutdown")
        back(mixed.broker(1), killed=False)
        elect_preferred(mixed, topic, [1])  # Kafka -> ours
        moved(1, 1, "a preferred election")
        mixed.broker(0).kill()  # SIGKILL, Kafka -> ours
        moved(0, 1, "SIGKILL of the Kafka leader")
        back(mixed.broker(0), killed=True)
        mixed.broker(1).kill()  # SIGKILL, ours -> Kafka (both partitions)
        moved(0, 0, "SIGKILL of our leader")
        moved(1, 2, "SIGKILL of our leader")
        back(mixed.broker(1), killed=True)
        elect_preferred(mixed, topic, [1])
        moved(1, 1, "a preferred election")
    finally:
        producer.stop()
    check_exactly_once(producer, read_all(mixed.brokers[0].bootstrap, topic, 2))
    for partition, replicas in enumerate(assignment):
        wait_for_identical_replicas(mixed, topic, partition, replicas)


def test_group_offsets_survive_the_coordinator_moving_between_kinds(mixed: MixedCluster) -> None:
    """A group commits through a coordinator of one kind; its __consumer_offsets partition's
    leadership moves to a broker of the other kind (controlled shutdowns) and back (preferred
    election); each new coordinator loads the offsets the other kind wrote, and the group's
    consumers read every message exactly once, in order."""
    topic = _topic("grouped")
    create_topic(mixed, topic, [[0, 1, 2]])
    producer = NumberedProducer(mixed.brokers[1].bootstrap, topic, 1, rate=5000, n=300)
    producer.start()
    producer.finish()
    group = f"mixed-group-{uuid.uuid4().hex[:8]}"
    first = find_coordinator(mixed, group)
    offsets_partition = partition_for(group, int(MIXED_DEFAULTS["offsets.topic.num.partitions"]))
    consumed = consume_and_commit(mixed, topic, group, 100, reset="earliest")

    # Leadership can only move to a replica in the ISR: wait until every replica of the new
    # offsets partitions has caught up, then stop the replicas of the group's offsets partition
    # that come before the first one of the other kind, and the current leader (after an earlier
    # test's restart it may lead from further down the assignment).
    wait_for_full_isr(mixed, "__consumer_offsets", int(MIXED_DEFAULTS["offsets.topic.num.partitions"]))
    replicas = _replicas(mixed, "__consumer_offsets", offsets_partition)
    other = next(r for r in replicas if mixed.kind(mixed.broker(r)) != mixed.kind(first))
    ahead = dict.fromkeys(replicas[:replicas.index(other)] + [first.broker_id])
    stopped = [mixed.broker(r) for r in ahead if mixed.broker(r).process is not None]
    for broker in stopped:
        broker.stop()
    try:
        wait_for_leader(mixed, "__consumer_offsets", offsets_partition, lambda leader: leader == other,
                        f"broker {other} leading the group's offsets partition")
        assert find_coordinator(mixed, group).broker_id == other
        consumed += consume_and_commit(mixed, topic, group, 100)
    finally:
        for broker in stopped:
            broker.start(60)
    wait_for_full_isr(mixed, "__consumer_offsets", int(MIXED_DEFAULTS["offsets.topic.num.partitions"]))
    elect_preferred(mixed, "__consumer_offsets", [offsets_partition])
    wait_for_leader(mixed, "__consumer_offsets", offsets_partition, lambda leader: leader == replicas[0],
                    "the preferred leader of the group's offsets partition")
    assert find_coordinator(mixed, group).broker_id == replicas[0]
    consumed += consume_and_commit(mixed, topic, group, 100)
    assert consumed == list(range(300)), "the group's consumers skipped or re-read messages"


def _replicas(mixed: MixedCluster, topic: str, partition: int) -> list[int]:
    reader = mixed.zk()
    try:
        return reader.assignment(topic, partition)
    finally:
        reader.close()
