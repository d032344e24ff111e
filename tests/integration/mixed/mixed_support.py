"""What the mixed-cluster tests share: a cluster of both kinds of broker, topics laid out across
kinds, the ISR as ZooKeeper and every broker see it, replicas' files, and the controller."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import ZkReader, agreed_state, live

KAFKA, OURS = "kafka", "ours"

# Both kinds: quick to fail over, no leader moves the tests did not ask for, a replicated
# __consumer_offsets with few partitions.
MIXED_DEFAULTS: dict[str, str] = {
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "default.replication.factor": "3",
}


StartMixed = Callable[..., "MixedCluster"]  # the start_mixed fixture: (kinds, overrides) -> started cluster


class MixedCluster(BrokerCluster):
    """Brokers 0..n-1 on one ZooKeeper chroot; ``kinds[i]`` is ``k`` for a real Kafka broker,
    ``o`` for ours."""

    def __init__(self, kinds: str, zk_connect: str, tmp_dir: Path, overrides: Mapping[str, str] | None = None,
                 request_log: bool = False) -> None:
        self.zk_connect = zk_connect
        self.tmp_dir = tmp_dir
        self.overrides = {**MIXED_DEFAULTS, **(overrides or {})}
        self.request_log = request_log  # Kafka brokers log every request they answer
        self.brokers = [self._new(KAFKA if kind == "k" else OURS, i) for i, kind in enumerate(kinds)]

    def _new(self, kind: str, broker_id: int, port: int | None = None) -> BrokerProcess:
        if kind == KAFKA:
            return KafkaJavaBroker(self.zk_connect, broker_id, self.tmp_dir, self.overrides, port,
                                   request_log=self.request_log)
        return BrokerProcess(self.zk_connect, broker_id, self.tmp_dir, self.overrides, port)

    @staticmethod
    def kind(broker: BrokerProcess) -> str:
        return KAFKA if isinstance(broker, KafkaJavaBroker) else OURS

    def of_kind(self, kind: str) -> list[BrokerProcess]:
        return [b for b in self.brokers if self.kind(b) == kind]

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def zk(self) -> ZkReader:
        return ZkReader(self.zk_connect)

    def controller_id(self) -> int | None:
        """The controller as ZooKeeper's ``/controller`` names it."""
        from kazoo.exceptions import NoNodeError

        reader = self.zk()
        try:
            data, _ = reader.client.get("/controller")
            return int(json.loads(data)["brokerid"])
        except NoNodeError:
            return None
        finally:
            reader.close()

    def wait_for_controller(self, other_than: int | None = None, timeout: float = 45.0) -> BrokerProcess:
        """A live controller (not ``other_than``), once every live broker's metadata names it."""
        def elected() -> BrokerProcess | None:
            found = self.controller_id()
            if found is None or found == other_than or self.broker(found).process is None:
                return None
            agreed = all(b.metadata([]).controller_id == found for b in live(self))
            return self.broker(found) if agreed else None
        return wait_for(elected, f"a controller other than {other_than}", timeout)

    def replace(self, broker_id: int, kind: str, timeout: float = 60.0) -> BrokerProcess:
        """Kafka's rolling upgrade step: the stopped broker's id, port and log dir, run by ``kind``."""
        old = self.broker(broker_id)
        assert old.process is None, f"{old} must be stopped first"
        new = self._new(kind, broker_id, old.port)
        new.log_dir = old.log_dir
        self.brokers[broker_id] = new
        new.start(timeout)
        return new

    def restart_after_kill(self, broker: BrokerProcess) -> None:
        broker.wait_until_deregistered()
        broker.start(60)

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in live(self))})


def create_topic(cluster: MixedCluster, topic: str, assignment: Sequence[Sequence[int]],
                 configs: Mapping[str, str] | None = None) -> None:
    """CreateTopics (to the controller, whichever kind) with an explicit replica assignment
    (the first replica is the preferred leader); returns when every live broker sees the leaders."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()  # kept referenced until the result arrives: a collected client fails its futures
    futures = admin.create_topics([NewTopic(
        topic, num_partitions=len(assignment), replica_assignment=[list(r) for r in assignment],
        config=dict(configs or {}))], operation_timeout=30, request_timeout=40)
    futures[topic].result(60)
    for broker in live(cluster):
        broker.wait_for_leaders(topic, len(assignment), 30)


def delete_topic(cluster: MixedCluster, topic: str, timeout: float = 60.0) -> None:
    """DeleteTopics (to the controller, whichever kind); returns once ZooKeeper no longer has it."""
    admin = cluster.admin()
    admin.delete_topics([topic], operation_timeout=30, request_timeout=40)[topic].result(60)
    reader = cluster.zk()
    try:
        wait_for(lambda: not reader.client.exists(f"/brokers/topics/{topic}")
                 and not reader.client.exists(f"/admin/delete_topics/{topic}"), f"{topic} deleted", timeout)
    finally:
        reader.close()


def wait_for_full_isr(cluster: MixedCluster, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Every partition's ISR holds all its replicas, and ZooKeeper and every live broker agree on it."""
    reader = cluster.zk()
    try:
        def full(partition: int) -> bool:
            view = agreed_state(cluster, reader, topic, partition)
            return view is not None and view.leader >= 0 and sorted(view.replicas) == list(view.isr)
        for partition in range(partitions):
            wait_for(lambda: full(partition), f"the full ISR of {topic}-{partition} everywhere", timeout)
    finally:
        reader.close()


def leader_of(cluster: MixedCluster, topic: str, partition: int = 0) -> BrokerProcess:
    reader = cluster.zk()
    try:
        state = wait_for(lambda: reader.partition_state(topic, partition), f"the state of {topic}-{partition}")
        return cluster.broker(state["leader"])
    finally:
        reader.close()


def wait_for_leader(cluster: MixedCluster, topic: str, partition: int, accept: Callable[[int], bool],
                    what: str, timeout: float = 45.0) -> BrokerProcess:
    """Wait until ZooKeeper and every live broker agree on a leader that ``accept`` takes."""
    reader = cluster.zk()
    try:
        view = wait_for(lambda: (v := agreed_state(cluster, reader, topic, partition)) is not None
                        and accept(v.leader) and v, what, timeout)
        return cluster.broker(view.leader)
    finally:
        reader.close()


def replica_files(broker: BrokerProcess, topic: str, partition: int) -> dict[str, bytes]:
    """What must be byte-identical on every replica: the segments, the leader-epoch checkpoint and
    partition.metadata (indexes and producer snapshots are each replica's own)."""
    directory = broker.log_dir / f"{topic}-{partition}"
    names = [f for f in sorted(directory.iterdir()) if f.suffix == ".log"
             or f.name in ("leader-epoch-checkpoint", "partition.metadata")]
    return {f.name: f.read_bytes() for f in names}


def wait_for_identical_replicas(cluster: MixedCluster, topic: str, partition: int, replicas: Sequence[int],
                                timeout: float = 30.0) -> dict[str, bytes]:
    """Wait until every replica holds the same bytes; on timeout, say which files differ."""
    deadline = time.monotonic() + timeout
    while True:
        contents = {r: replica_files(cluster.broker(r), topic, partition) for r in replicas}
        first = contents[replicas[0]]
        if first and all(c == first for c in contents.values()):
            return first
        if time.monotonic() > deadline:
            differing = {r: {name: len(data) for name, data in c.items()} for r, c in contents.items()}
            raise AssertionError(f"replicas of {topic}-{partition} still differ after {timeout}s: {differing}")
        time.sleep(0.1)


def elect_preferred(cluster: MixedCluster, topic: str, partitions: Sequence[int]) -> None:
    """ElectLeaders (preferred) through the admin client, to the controller of either kind; a
    partition already led by its preferred replica is fine (ELECTION_NOT_NEEDED)."""
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    admin = cluster.admin()
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in partitions]).result(60)
    errors = {f"{tp.topic}-{tp.partition}": str(e) for tp, e in result.items()
              if e is not None and e.code() != KafkaError.ELECTION_NOT_NEEDED}
    assert not errors, f"preferred election failed: {errors}"


def reassign(cluster: MixedCluster, topic: str, partition: int, replicas: Sequence[int], timeout: float = 60.0) -> None:
    """AlterPartitionReassignments to the controller (either kind); returns once the reassignment
    completed: ZooKeeper has the new replicas, nothing adding or removing, and the full ISR."""
    from protocol.api_keys import ApiKey
    from protocol.messages import AlterPartitionReassignmentsRequest as Request

    controller = cluster.broker(cluster.controller_id() or 0)
    response = controller.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, Request(timeout_ms=30000, topics=[
        Request.ReassignableTopic(name=topic, partitions=[
            Request.ReassignablePartition(partition_index=partition, replicas=list(replicas))])]), timeout=40)
    assert response.error_code == 0 and [p.error_code for t in response.responses for p in t.partitions] == [0], \
        response
    reader = cluster.zk()
    try:
        def done() -> bool:
            data, _ = reader.client.get(f"/brokers/topics/{topic}")
            value = json.loads(data)
            return value["partitions"][str(partition)] == list(replicas) and not value["adding_replicas"] \
                and not value["removing_replicas"]
        wait_for(done, f"the reassignment of {topic}-{partition} to {list(replicas)}", timeout)
    finally:
        reader.close()


def find_coordinator(cluster: MixedCluster, group: str) -> BrokerProcess:
    """The group's coordinator as the brokers answer FindCoordinator (the first call creates
    __consumer_offsets)."""
    from protocol.api_keys import ApiKey
    from protocol.messages import FindCoordinatorRequest

    def answer() -> BrokerProcess | None:
        response = live(cluster)[0].request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
        return cluster.broker(response.node_id) if response.error_code == 0 else None
    return wait_for(answer, f"the coordinator of group {group}", 45)


def consume_and_commit(cluster: MixedCluster, topic: str, group: str, count: int, reset: str = "error"
                       ) -> list[int]:
    """A new member of ``group`` starts at the group's committed offset (an error when there is none,
    unless ``reset`` says where), reads ``count`` messages, commits after each and leaves."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": ",".join(b.bootstrap for b in live(cluster)), "group.id": group,
        "enable.auto.commit": False, "auto.offset.reset": reset, "topic.metadata.refresh.interval.ms": 1000})
    read: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(read) < count:
            assert time.monotonic() < deadline, f"read {len(read)} of {count} messages in 60s"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            read.append(int(msg.value()))
            consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()
    return read
