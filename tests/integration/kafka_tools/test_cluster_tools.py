"""The operations tools on three brokers, against a cluster of ours and a cluster of real Kafka 3.9
side by side: kafka-reassign-partitions (generate, execute with a throttle, verify),
kafka-leader-election (preferred; unclean after the in-sync replicas are gone) and kafka-log-dirs."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import ListPartitionReassignmentsRequest
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli
from tests.harness.kafka_broker import KAFKA_TEST_DEFAULTS, KafkaJavaBroker
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.kafka_tools.tool_support import SideBySide, timed_batch, unique

pytestmark = pytest.mark.integration

T0 = int(time.time() * 1000) - 3_600_000  # within retention (Kafka's first check is 30 s after start)


@pytest.fixture(scope="module")
def cluster(cli: KafkaCli, shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[SideBySide]:
    """Three brokers of ours and three of Kafka's, each cluster on its own ZooKeeper chroot."""
    suffix = uuid.uuid4().hex[:12]
    ours: list[BrokerProcess] = [BrokerProcess(shared_zookeeper.connect_string_with_chroot(f"ours3-{suffix}"), i,
                                               tmp_path_factory.mktemp("ours3"), KAFKA_TEST_DEFAULTS) for i in range(3)]
    kafka: list[BrokerProcess] = [KafkaJavaBroker(shared_zookeeper.connect_string_with_chroot(f"kafka3-{suffix}"), i,
                                                  tmp_path_factory.mktemp("kafka3")) for i in range(3)]
    try:
        for broker in (*ours, *kafka):  # from this thread: a broker dies with the thread that started it
            broker.start()
        yield SideBySide(cli, ours, kafka)
    finally:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda broker: broker.stop(), (*ours, *kafka)))


def _topic(sides: SideBySide, assignment: dict[int, list[int]]) -> str:
    topic = unique("ops")
    sides.create_topic(topic, assignment=assignment)
    return topic


def _describe(sides: SideBySide, topic: str) -> list[list[str]]:
    """Partition, leader, replicas and ISR of each partition (both sides the same)."""
    described = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic])
    return [line.split("\t")[2:6] for line in described.lines()[1:]]


def _reassignment_done(broker: BrokerProcess) -> bool:
    answer = broker.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                            ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None))
    return answer.error_code == 0 and not answer.topics


def _in_sync(broker: BrokerProcess, topic: str) -> bool:
    partitions = broker.metadata([topic]).topics[0].partitions
    return bool(partitions) and all(sorted(p.isr_nodes) == sorted(p.replica_nodes) for p in partitions)


def _settled(sides: SideBySide, topic: str) -> None:
    for broker in (sides.ours[0], sides.kafka[0]):
        wait_for(lambda: _reassignment_done(broker) and _in_sync(broker, topic), f"{topic} settled on {broker}", 60)


def _plan(tmp_path: Path, name: str, topic: str, replicas: dict[int, list[int]]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for p, r in replicas.items()]}))
    return str(path)


def test_reassign_partitions_with_a_throttle(cluster: SideBySide, tmp_path: Path) -> None:
    topic = _topic(cluster, {0: [0, 1], 1: [1, 2]})
    cluster.produce(topic, [timed_batch([(T0 + i, None, f"event-{i}".encode()) for i in range(b, b + 10)])
                            for b in (0, 10)])
    _settled(cluster, topic)

    to_move = tmp_path / "topics.json"
    to_move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = cluster.run("kafka-reassign-partitions", ["--bootstrap-server", "{bootstrap}", "--generate",
                                                         "--topics-to-move-json-file", str(to_move),
                                                         "--broker-list", "0,1,2"])
    ours, kafka = (outcome.lines() for outcome in generated)
    assert ours[:2] == kafka[:2] == ["Current partition replica assignment", json.dumps({
        "version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0, 1], "log_dirs": ["any", "any"]},
            {"topic": topic, "partition": 1, "replicas": [1, 2], "log_dirs": ["any", "any"]}]},
        separators=(",", ":"))]
    proposed = json.loads(ours[-1])["partitions"]  # Kafka's proposal is random too
    assert [len(set(p["replicas"]) & {0, 1, 2}) for p in proposed] == [2, 2]

    plan = _plan(tmp_path, "plan", topic, {0: [2, 0], 1: [0, 1]})
    executed = cluster.same("kafka-reassign-partitions", ["--bootstrap-server", "{bootstrap}", "--execute",
                                                         "--reassignment-json-file", plan, "--throttle", "50000000"])
    assert "The inter-broker throttle limit was set to 50000000 B/s" in executed.stdout
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in executed.stdout
    throttled = cluster.same("kafka-configs", ["--bootstrap-server", "{bootstrap}", "--describe",
                                               "--entity-type", "topics", "--entity-name", topic])
    assert "leader.replication.throttled.replicas=" in throttled.stdout
    broker_throttle = cluster.same("kafka-configs", ["--bootstrap-server", "{bootstrap}", "--describe",
                                                     "--entity-type", "brokers", "--entity-name", "1"])
    assert "follower.replication.throttled.rate=50000000" in broker_throttle.stdout

    _settled(cluster, topic)
    verified = cluster.same("kafka-reassign-partitions", ["--bootstrap-server", "{bootstrap}", "--verify",
                                                         "--reassignment-json-file", plan])
    assert verified.lines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
        f"Reassignment of partition {topic}-1 is completed.",
        "",
        "Clearing broker-level throttles on brokers 0,1,2",
        f"Clearing topic-level throttles on topic {topic}",
    ]
    unthrottled = cluster.same("kafka-configs", ["--bootstrap-server", "{bootstrap}", "--describe",
                                                 "--entity-type", "brokers", "--entity-name", "1"])
    assert unthrottled.lines() == ["Dynamic configs for broker 1 are:"]
    assert [row[:3] for row in _describe(cluster, topic)] == [
        ["Partition: 0", "Leader: 0", "Replicas: 2,0"], ["Partition: 1", "Leader: 1", "Replicas: 0,1"]]
    consumed = cluster.same("kafka-console-consumer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                                       "--from-beginning", "--max-messages", "20",
                                                       "--timeout-ms", "30000"], sort=True)
    assert sorted(consumed.lines()) == sorted(f"event-{i}" for i in range(20))
    log_dirs = cluster.same("kafka-log-dirs", ["--bootstrap-server", "{bootstrap}", "--describe",
                                               "--broker-list", "0,1,2", "--topic-list", topic])
    described = json.loads(log_dirs.lines()[-1])
    hosted = {(b["broker"], p["partition"]) for b in described["brokers"] for d in b["logDirs"] for p in d["partitions"]}
    assert hosted == {(2, f"{topic}-0"), (0, f"{topic}-0"), (0, f"{topic}-1"), (1, f"{topic}-1")}


def test_preferred_leader_election(cluster: SideBySide, tmp_path: Path) -> None:
    topic = _topic(cluster, {0: [0, 1], 1: [1, 2]})
    # Only the order changes: the leaders stay, and are no longer the preferred replicas.
    plan = _plan(tmp_path, "reorder", topic, {0: [1, 0], 1: [2, 1]})
    cluster.same("kafka-reassign-partitions", ["--bootstrap-server", "{bootstrap}", "--execute",
                                              "--reassignment-json-file", plan])
    _settled(cluster, topic)
    assert [row[1] for row in _describe(cluster, topic)] == ["Leader: 0", "Leader: 1"]

    elected = cluster.same("kafka-leader-election", ["--bootstrap-server", "{bootstrap}", "--election-type",
                                                    "preferred", "--topic", topic, "--partition", "0"])
    assert elected.lines() == [f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"]
    # Other tests' topics may have partitions to elect too; the tool prints a Java HashSet, whose
    # order for colliding partitions follows the broker's answer (a Scala map's order in Kafka's).
    everything = cluster.run("kafka-leader-election", ["--bootstrap-server", "{bootstrap}", "--election-type",
                                                      "preferred", "--all-topic-partitions"])
    prefix = "Successfully completed leader election (PREFERRED) for partitions "
    elected_everywhere = [set(o.stdout.strip().removeprefix(prefix).split(", ")) for o in everything]
    assert elected_everywhere[0] == elected_everywhere[1] and f"{topic}-1" in elected_everywhere[0]
    assert [row[1] for row in _describe(cluster, topic)] == ["Leader: 1", "Leader: 2"]
    again = cluster.same("kafka-leader-election", ["--bootstrap-server", "{bootstrap}", "--election-type",
                                                  "preferred", "--topic", topic, "--partition", "0"],
                         stderr=True, ok=False)
    assert f"Valid replica already elected for partitions {topic}-0" in again.stdout + again.stderr
    unclean = cluster.same("kafka-leader-election", ["--bootstrap-server", "{bootstrap}", "--election-type",
                                                    "unclean", "--topic", topic, "--partition", "1"],
                           stderr=True, ok=False)
    assert f"Valid replica already elected for partitions {topic}-1" in unclean.stdout + unclean.stderr


def test_unclean_leader_election(cluster: SideBySide) -> None:
    """Run on our cluster alone (it stops brokers): the leader and the last in-sync replica of a
    partition go away, a replica that was out of sync comes back, and only an unclean election
    gives the partition a leader again."""
    topic = _topic(cluster, {0: [1, 2]})
    first, second = cluster.ours[1], cluster.ours[2]
    wait_for(lambda: _in_sync(first, topic), f"{topic} in sync", 30)
    second.stop()
    wait_for(lambda: first.metadata([topic]).topics[0].partitions[0].isr_nodes == [1], "ISR [1]", 30)
    first.stop()
    try:
        second.start()
        wait_for(lambda: second.metadata([topic]).topics[0].partitions[0].leader_id == -1, "offline partition", 30)
        elected = cluster.cli.run("kafka-leader-election", ["--bootstrap-server", second.bootstrap,
                                                            "--election-type", "unclean",
                                                            "--topic", topic, "--partition", "0"])
        assert elected.stdout.splitlines() == [
            f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0"]
        wait_for(lambda: second.metadata([topic]).topics[0].partitions[0].leader_id == 2, "broker 2 leads", 30)
    finally:
        first.start()
