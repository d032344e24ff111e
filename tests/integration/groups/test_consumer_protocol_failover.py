"""KIP-848 groups under failure, with librdkafka's group.protocol=consumer on three brokers: the
coordinator's broker SIGKILLed while members consume and commit (every record consumed, committed
offsets never go backwards, no partition owned by two members at once), and members joining and
leaving one by one while the others keep their partitions."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import FindCoordinatorRequest, OffsetFetchRequest
from tests.harness.broker import BrokerCluster
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import request, unique, wait_for_coordinator

PARTITIONS = 6


class Member:
    """One consumer-protocol member in a thread: reads, commits what it read, records what it owned."""

    def __init__(self, bootstrap: str, group: str, topic: str, log: list[tuple[str, str, int]]) -> None:
        from confluent_kafka import Consumer

        self.name = unique("m")
        self.log = log  # (member, "assign"/"revoke", partition), in the order the callbacks ran
        self.values: list[bytes] = []
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        self.log.extend((self.name, "assign", tp.partition) for tp in partitions)

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        self.log.extend((self.name, "revoke", tp.partition) for tp in partitions)

    def _run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            self.values.append(message.value())
            try:
                self.consumer.commit(message=message, asynchronous=False)
            except Exception:  # noqa: BLE001 - a commit during a failover is retried by the next one
                pass
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def _produce(bootstrap: str, topic: str, per_partition: int, prefix: str) -> set[bytes]:
    """Idempotent librdkafka producer: it rides out a leader's death by itself."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = set()
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            value = f"{prefix}-{partition}-{i}".encode()
            producer.produce(topic, value, partition=partition)
            values.add(value)
    assert producer.flush(120) == 0
    return values


def _owners_never_overlap(log: list[tuple[str, str, int]]) -> None:
    """Replaying the callbacks in order, a partition is never assigned to a member while another holds it."""
    owner: dict[int, str] = {}
    for member, event, partition in log:
        if event == "assign":
            assert partition not in owner or owner[partition] == member, (partition, owner[partition], member)
            owner[partition] = member
        elif owner.get(partition) == member:
            del owner[partition]


def _committed(cluster: BrokerCluster, group: str, topic: str) -> dict[int, int] | None:
    for broker in cluster.brokers:
        if broker.process is None:
            continue
        try:
            found = request(broker, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
            if found.error_code != Errors.NONE:
                return None
            coordinator = next(b for b in cluster.brokers if b.broker_id == found.node_id)
            answer = request(coordinator, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(PARTITIONS)))]))
        except (OSError, StopIteration):
            return None
        if answer.error_code != Errors.NONE:
            return None
        return {p.partition_index: p.committed_offset for p in answer.topics[0].partitions}
    return None


@pytest.mark.timeout(600)
def test_the_coordinator_dies_under_load_and_nothing_is_lost(replicated_cluster: BrokerCluster) -> None:
    cluster = replicated_cluster
    brokers = cluster.brokers
    topic, group = unique("t"), unique("g")
    brokers[0].create_topic(topic, PARTITIONS, replication_factor=3)
    coordinator_id = wait_for_coordinator(brokers[0], group, timeout=60)
    log: list[tuple[str, str, int]] = []
    members = [Member(cluster.bootstrap, group, topic, log) for _ in range(3)]
    seen_commits: list[dict[int, int]] = []
    try:
        expected = _produce(cluster.bootstrap, topic, 20, "before")
        wait_for(lambda: {v for m in members for v in m.values} >= expected, "the first records", 120)
        seen_commits.append(wait_for(lambda: _committed(cluster, group, topic), "committed offsets", 60))
        next(b for b in brokers if b.broker_id == coordinator_id).kill()
        expected |= _produce(cluster.bootstrap, topic, 20, "after")

        def progressed() -> bool:
            committed = _committed(cluster, group, topic)
            if committed is not None:
                seen_commits.append(committed)
            return {v for m in members for v in m.values} >= expected and committed is not None \
                and all(committed[p] == 40 for p in range(PARTITIONS))

        wait_for(progressed, "every record read and committed after the failover", 240)
    finally:
        for member in members:
            member.close()
    for earlier, later in zip(seen_commits, seen_commits[1:]):
        assert all(later[p] >= earlier[p] for p in earlier), (earlier, later)
    _owners_never_overlap(log)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("replicated_cluster", [{"group.consumer.min.heartbeat.interval.ms": "500",
                                                 "group.consumer.heartbeat.interval.ms": "1000"}], indirect=True)
def test_members_join_and_leave_one_by_one_and_the_others_keep_their_partitions(
        replicated_cluster: BrokerCluster) -> None:
    cluster = replicated_cluster
    brokers = cluster.brokers
    topic, group = unique("t"), unique("g")
    partitions = 20
    brokers[0].create_topic(topic, partitions, replication_factor=1)
    wait_for_coordinator(brokers[0], group, timeout=60)
    log: list[tuple[str, str, int]] = []
    members: list[Member] = []

    def owned() -> dict[str, set[int]]:
        held: dict[str, set[int]] = {}
        for member, event, partition in list(log):
            if event == "assign":
                held.setdefault(member, set()).add(partition)
            else:
                held.get(member, set()).discard(partition)
        return held

    def balanced(count: int) -> bool:
        held = owned()
        sizes = sorted(len(held.get(m.name, ())) for m in members)
        return len(members) == count and sum(sizes) == partitions and sizes[-1] - sizes[0] <= 1

    try:
        for count in range(1, 21):
            before = owned()
            revoked_before = sum(1 for _, event, _ in log if event == "revoke")
            members.append(Member(cluster.bootstrap, group, topic, log))
            wait_for(lambda: balanced(count), f"{count} members balanced", 120)
            moved = sum(1 for _, event, _ in log if event == "revoke") - revoked_before
            after = owned()
            gained = after.get(members[-1].name, set())
            # Only what the newcomer got moved: every other member kept the rest of what it had.
            assert moved == (len(gained) if count > 1 else 0), (count, moved, len(gained), log[-20:])
            for name, partitions_before in before.items():
                assert partitions_before - after.get(name, set()) <= gained, name
        while len(members) > 1:
            members.pop(0).close()
            wait_for(lambda: balanced(len(members)), f"{len(members)} members balanced", 120)
        _owners_never_overlap(log)
    finally:
        for member in members:
            member.close()
