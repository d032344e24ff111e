"""JBOD on three brokers under load: RF=3 topics (``min.insync.replicas=2``) written by an
idempotent acks=all librdkafka producer while replicas move between log dirs on every broker
(``kafka-reassign-partitions.sh`` with ``log_dirs``), and while the disk under a leader's replica
fills up. Each broker has two log dirs: a small loop-mounted ext4 (root only) and a plain
directory. When the leader's disk fails, its dir goes offline as in Kafka: the controller moves
the leadership, the broker keeps serving its other dir, and once the disk is freed a restart
brings the replica back into the ISR. Every acknowledged write is read back exactly once."""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
from tests.faults.disks import SmallDisk, loop_disks_unavailable_reason, remove_tag_mounts
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli, kafka_cli
from tests.harness.numbered_messages import NumberedProducer, check_exactly_once, read_all
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.integration

PARTITIONS = 2
DISK_MIB = 48
A = AlterReplicaLogDirsRequest


class JbodCluster:
    def __init__(self, brokers: list[BrokerProcess], disks: list[SmallDisk], plain: list[Path]) -> None:
        self.brokers, self.disks, self.plain = brokers, disks, plain

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def dirs(self, broker_id: int) -> tuple[str, str]:
        """(the loop-mounted dir, the plain dir) of a broker."""
        return str(self.disks[broker_id].mount_point), str(self.plain[broker_id])

    def observer(self, *but: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id not in but and b.process is not None)


@pytest.fixture(scope="module")
def jbod_cluster(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
                 request: pytest.FixtureRequest) -> Iterator[JbodCluster]:
    if reason := loop_disks_unavailable_reason():
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("jbod-cluster")
    tag = f"pkjb{uuid.uuid4().hex[:4]}"
    zk = shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}")
    disks = [SmallDisk(tag, tmp, f"b{i}", size_mib=DISK_MIB) for i in range(3)]
    plain = [tmp / f"b{i}-plain" for i in range(3)]
    brokers = [BrokerProcess(zk, i, tmp, {
        "log.dirs": f"{disks[i].mount_point},{plain[i]}", "log.segment.bytes": str(1 << 20),
        "log.segment.delete.delay.ms": "1000", "replica.lag.time.max.ms": "5000"}) for i in range(3)]
    try:
        for disk in disks:
            disk.mount()
        for broker in brokers:
            broker.start()
        yield JbodCluster(brokers, disks, plain)
    finally:
        for broker in brokers:
            if request.session.testsfailed:
                broker.dump_threads_if_stuck()
                print(f"--- broker {broker.broker_id} log ---\n{broker.log_tail(300)}")
            broker.kill()
        remove_tag_mounts(tag)
        for disk in disks:
            disk.image.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> KafkaCli:
    return kafka_cli(tmp_path_factory.mktemp("jbod-cluster-cli"))


def _partitions(broker: BrokerProcess, topic: str) -> dict[int, Any]:
    topics = broker.metadata([topic]).topics
    return {p.partition_index: p for p in topics[0].partitions} if topics and not topics[0].error_code else {}


def _place(cli: KafkaCli, cluster: JbodCluster, topic: str, tmp_path: Path, loop: dict[int, bool]) -> str:
    """Keep every partition's replicas but put each one on its broker's loop-mounted dir (``loop[p]``)
    or plain dir, through ``kafka-reassign-partitions.sh --execute``; the plan's path."""
    partitions = _partitions(cluster.brokers[0], topic)
    plan = {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": list(partitions[p].replica_nodes),
         "log_dirs": [cluster.dirs(r)[0 if on_loop else 1] for r in partitions[p].replica_nodes]}
        for p, on_loop in loop.items()]}
    path = tmp_path / f"plan-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(plan))
    cli.run("kafka-reassign-partitions", ["--bootstrap-server", cluster.bootstrap, "--execute",
                                          "--reassignment-json-file", str(path)])
    return str(path)


def _placed(cluster: JbodCluster, topic: str, loop: dict[int, bool]) -> bool:
    return all(os.path.isdir(os.path.join(cluster.dirs(b.broker_id)[0 if on_loop else 1], f"{topic}-{p}"))
               for p, on_loop in loop.items() for b in cluster.brokers)


def _verified(cli: KafkaCli, cluster: JbodCluster, plan: str) -> bool:
    out = cli.run("kafka-reassign-partitions", ["--bootstrap-server", cluster.bootstrap, "--verify",
                                                "--reassignment-json-file", plan]).stdout
    return "in progress" not in out and out.count("completed successfully") == 3 * PARTITIONS


def _move(cli: KafkaCli, cluster: JbodCluster, topic: str, tmp_path: Path, loop: dict[int, bool]) -> None:
    plan = _place(cli, cluster, topic, tmp_path, loop)
    wait_for(lambda: _verified(cli, cluster, plan) and _placed(cluster, topic, loop), "the log dir moves", 90)


def _create(cluster: JbodCluster, topic: str) -> None:
    cluster.brokers[0].create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                    configs={"min.insync.replicas": "2"})


def test_replicas_move_between_dirs_on_every_broker_while_a_producer_writes(
        jbod_cluster: JbodCluster, cli: KafkaCli, tmp_path: Path) -> None:
    topic = f"moves-{uuid.uuid4().hex[:6]}"
    _create(jbod_cluster, topic)
    producer = NumberedProducer(jbod_cluster.bootstrap, topic, PARTITIONS, rate=2000)
    producer.start()
    producer.wait_for_progress(2000)
    _move(cli, jbod_cluster, topic, tmp_path, {0: True, 1: False})
    producer.wait_for_progress(2000)
    _move(cli, jbod_cluster, topic, tmp_path, {0: False, 1: True})
    producer.wait_for_progress(2000)
    producer.stop(150)
    check_exactly_once(producer, read_all(jbod_cluster.bootstrap, topic, PARTITIONS))


def test_a_full_disk_under_the_leader_moves_leadership_and_loses_no_acknowledged_write(
        jbod_cluster: JbodCluster, cli: KafkaCli, tmp_path: Path) -> None:
    topic = f"disk-{uuid.uuid4().hex[:6]}"
    _create(jbod_cluster, topic)
    _move(cli, jbod_cluster, topic, tmp_path, {0: True, 1: False})  # partition 0 on the small disks
    producer = NumberedProducer(jbod_cluster.bootstrap, topic, PARTITIONS, rate=1000)
    producer.start()
    producer.wait_for_progress(2000)
    leader_id = _partitions(jbod_cluster.brokers[0], topic)[0].leader_id
    victim = jbod_cluster.brokers[leader_id]
    loop_dir, plain_dir = jbod_cluster.dirs(leader_id)
    jbod_cluster.disks[leader_id].fill()

    observer = jbod_cluster.observer(leader_id)
    moved = wait_for(lambda: (p := _partitions(observer, topic).get(0)) is not None
                     and p.leader_id not in (-1, leader_id) and leader_id in p.offline_replicas and p,
                     "the leadership of partition 0 to leave the failed disk", 60)
    assert leader_id not in moved.isr_nodes
    producer.wait_for_progress(2000)
    assert victim.process is not None and victim.process.poll() is None, "a broker with a live dir keeps running"
    every_partition = DescribeLogDirsRequest(topics=None)
    results = {r.log_dir: r for r in victim.request(ApiKey.DESCRIBE_LOG_DIRS, 4, every_partition).results}
    assert (results[loop_dir].error_code, results[plain_dir].error_code) == (Errors.KAFKA_STORAGE_ERROR, 0)
    assert [t.name for t in results[plain_dir].topics if t.name == topic] == [topic]  # partition 1 still served

    jbod_cluster.disks[leader_id].free()
    victim.stop()
    victim.start()
    wait_for(lambda: all(len(p.isr_nodes) == 3 for p in _partitions(observer, topic).values()),
             f"broker {leader_id} back in every ISR", 60)
    producer.wait_for_progress(1000)
    producer.stop(150)
    check_exactly_once(producer, read_all(jbod_cluster.bootstrap, topic, PARTITIONS))


def test_a_replica_reassigned_to_another_broker_is_created_in_the_dir_asked_for_before(
        jbod_cluster: JbodCluster, cli: KafkaCli, tmp_path: Path) -> None:
    """AlterReplicaLogDirs for a replica a broker does not host yet answers REPLICA_NOT_AVAILABLE and
    remembers the dir: when the reassignment brings the replica there, its log is created in it
    (what kafka-reassign-partitions.sh relies on for a plan with log_dirs on new brokers)."""
    topic = f"newhome-{uuid.uuid4().hex[:6]}"
    jbod_cluster.brokers[0].create_topic(topic, partitions=1, replication_factor=1)
    (home,) = _partitions(jbod_cluster.brokers[0], topic)[0].replica_nodes
    target = next(b for b in jbod_cluster.brokers if b.broker_id != home)
    wanted = jbod_cluster.dirs(target.broker_id)[1]
    request = A(dirs=[A.AlterReplicaLogDir(path=wanted, topics=[A.AlterReplicaLogDirTopic(name=topic, partitions=[0])])])
    wait_for(lambda: target.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, request).results[0].partitions[0].error_code
             == Errors.REPLICA_NOT_AVAILABLE, "the target broker to know the topic")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [target.broker_id], "log_dirs": [wanted]}]}))
    cli.run("kafka-reassign-partitions", ["--bootstrap-server", jbod_cluster.bootstrap, "--execute",
                                          "--reassignment-json-file", str(plan)])
    wait_for(lambda: list(_partitions(jbod_cluster.brokers[0], topic)[0].replica_nodes) == [target.broker_id],
             "the reassignment", 60)
    assert os.path.isdir(os.path.join(wanted, f"{topic}-0"))
    assert f"Created log for partition {topic}-0 in {wanted}/{topic}-0" in target.log_path.read_text()
