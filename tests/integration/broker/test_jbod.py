"""One broker with several log dirs (JBOD), driven by Kafka's own tools: where partitions land,
``kafka-log-dirs.sh --describe``, replicas moved between dirs with ``kafka-reassign-partitions.sh``
(``log_dirs`` in the plan) while a producer writes, a throttled move caught half way (its
``-future`` log), a restart in the middle of it, and AlterReplicaLogDirs' errors. The same
placement and answers were checked side by side with a Kafka 3.9 broker."""
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
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli, kafka_cli
from tests.harness.numbered_messages import NumberedProducer, check_exactly_once, read_all
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.integration

DIRS = 3
A = AlterReplicaLogDirsRequest


@pytest.fixture(scope="module")
def jbod_broker(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("jbod")
    dirs = [tmp / f"disk{i}" for i in range(DIRS)]
    broker = BrokerProcess(shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}"), 0, tmp, {
        "log.dirs": ",".join(map(str, dirs)), "log.segment.delete.delay.ms": "1000", "log.initial.task.delay.ms": "1000",
        "log.segment.bytes": str(1 << 20),
        # A move copies this much at a time: small enough for a throttle to hold one back.
        "replica.fetch.max.bytes": str(64 << 10)})
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> KafkaCli:
    return kafka_cli(tmp_path_factory.mktemp("jbod-cli"))


def _dirs(broker: BrokerProcess) -> list[str]:
    return broker.properties()["log.dirs"].split(",")


def _log_dirs_json(cli: KafkaCli, broker: BrokerProcess, topic: str) -> dict[str, Any]:
    """``kafka-log-dirs.sh --describe`` for a topic: {log dir: {"error": ..., partition: entry}}."""
    out = cli.run("kafka-log-dirs", ["--bootstrap-server", broker.bootstrap, "--describe", "--topic-list", topic])
    described = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("{")))
    (entry,) = described["brokers"]
    return {d["logDir"]: {"error": d["error"], **{p["partition"]: p for p in d["partitions"]}} for d in entry["logDirs"]}


def _dir_of(broker: BrokerProcess, topic: str, partition: int) -> str:
    (found,) = [d for d in _dirs(broker) if os.path.isdir(os.path.join(d, f"{topic}-{partition}"))]
    return found


def _reassign(cli: KafkaCli, broker: BrokerProcess, tmp_path: Path, moves: dict[tuple[str, int], str],
              *extra: str) -> str:
    plan = {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": [0], "log_dirs": [d]}
                                         for (t, p), d in moves.items()]}
    path = tmp_path / f"plan-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(plan))
    cli.run("kafka-reassign-partitions", ["--bootstrap-server", broker.bootstrap, "--execute",
                                          "--reassignment-json-file", str(path), *extra])
    return str(path)


def _verify(cli: KafkaCli, broker: BrokerProcess, plan: str) -> str:
    return cli.run("kafka-reassign-partitions", ["--bootstrap-server", broker.bootstrap, "--verify",
                                                 "--reassignment-json-file", plan]).stdout


def test_partitions_spread_over_the_dirs_and_kafka_log_dirs_describes_them(jbod_broker: BrokerProcess,
                                                                           cli: KafkaCli) -> None:
    topic = f"spread-{uuid.uuid4().hex[:6]}"
    jbod_broker.create_topic(topic, partitions=2 * DIRS)
    producer = NumberedProducer(jbod_broker.bootstrap, topic, 2 * DIRS, rate=5000, n=600)
    producer.start()
    producer.finish()
    described = _log_dirs_json(cli, jbod_broker, topic)
    assert sorted(described) == sorted(_dirs(jbod_broker))
    for log_dir, entries in described.items():
        assert entries.pop("error") is None
        assert len(entries) == 2, f"{log_dir} holds {sorted(entries)}: the dirs should share the partitions"
        for name, entry in entries.items():
            assert entry["size"] == sum(f.stat().st_size for f in Path(log_dir, name).glob("*.log")) > 0
            assert (entry["offsetLag"], entry["isFuture"]) == (0, False)
    request = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0])])
    results = jbod_broker.request(ApiKey.DESCRIBE_LOG_DIRS, 4, request).results
    assert [r.log_dir for r in results] == _dirs(jbod_broker)
    assert all(r.error_code == 0 and r.total_bytes >= r.usable_bytes > 0 for r in results)
    assert [[(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] for r in results] == \
        [[(topic, [0])] if r.log_dir == _dir_of(jbod_broker, topic, 0) else [] for r in results]


def test_reassign_partitions_moves_replicas_between_dirs_while_a_producer_writes(
        jbod_broker: BrokerProcess, cli: KafkaCli, tmp_path: Path) -> None:
    topic = f"moving-{uuid.uuid4().hex[:6]}"
    jbod_broker.create_topic(topic, partitions=2)
    producer = NumberedProducer(jbod_broker.bootstrap, topic, 2, rate=2000)
    producer.start()
    producer.wait_for_progress(2000)
    before = {p: _dir_of(jbod_broker, topic, p) for p in range(2)}
    targets = {(topic, p): next(d for d in _dirs(jbod_broker) if d != before[p]) for p in range(2)}
    plan = _reassign(cli, jbod_broker, tmp_path, targets)
    wait_for(lambda: f"Reassignment of replica {topic}-0-0 completed successfully" in _verify(cli, jbod_broker, plan)
             and all(_dir_of(jbod_broker, t, p) == d for (t, p), d in targets.items()), "the moves", 60)
    producer.wait_for_progress(2000)
    back = _reassign(cli, jbod_broker, tmp_path, {(topic, p): before[p] for p in range(2)})
    wait_for(lambda: all(_dir_of(jbod_broker, topic, p) == before[p] for p in range(2)), "the moves back", 60)
    assert "completed successfully" in _verify(cli, jbod_broker, back)
    producer.wait_for_progress(1000)
    producer.stop(300)
    check_exactly_once(producer, read_all(jbod_broker.bootstrap, topic, 2))
    wait_for(lambda: not any(n.startswith(topic) and n.endswith("-delete")
                             for d in _dirs(jbod_broker) for n in os.listdir(d)), "the replaced logs to be deleted", 30)


def test_a_throttled_move_shows_its_future_log_and_resumes_after_a_restart(
        jbod_broker: BrokerProcess, cli: KafkaCli, tmp_path: Path) -> None:
    topic = f"slow-{uuid.uuid4().hex[:6]}"
    jbod_broker.create_topic(topic, partitions=1)
    producer = NumberedProducer(jbod_broker.bootstrap, topic, 1, rate=50_000, n=30_000, **{"linger.ms": 50})
    producer.start()
    producer.finish()
    source = _dir_of(jbod_broker, topic, 0)
    target = next(d for d in _dirs(jbod_broker) if d != source)
    plan = _reassign(cli, jbod_broker, tmp_path, {(topic, 0): target}, "--replica-alter-log-dirs-throttle", "10000")
    described = wait_for(lambda: (d := _log_dirs_json(cli, jbod_broker, topic)).get(target, {}).get(f"{topic}-0")
                         and d, "the future log")
    future, current = described[target][f"{topic}-0"], described[source][f"{topic}-0"]
    assert future["isFuture"] and not current["isFuture"] and current["offsetLag"] == 0
    assert 0 < future["offsetLag"] <= 30_000 and future["size"] < current["size"]
    assert "is still in progress" in _verify(cli, jbod_broker, plan)
    (future_dir,) = [n for n in os.listdir(target) if n.startswith(f"{topic}-0.") and n.endswith("-future")]

    jbod_broker.stop()
    assert os.path.isdir(os.path.join(target, future_dir)), "the future log must survive the restart"
    jbod_broker.start()
    assert f"loading future log {future_dir}" in jbod_broker.log_path.read_text()
    cli.run("kafka-configs", ["--bootstrap-server", jbod_broker.bootstrap, "--alter", "--entity-type", "brokers",
                              "--entity-name", "0", "--delete-config", "replica.alter.log.dirs.io.max.bytes.per.second"])
    wait_for(lambda: f"Reassignment of replica {topic}-0-0 completed successfully" in _verify(cli, jbod_broker, plan),
             "the resumed move", 60)
    assert _dir_of(jbod_broker, topic, 0) == target and not os.path.exists(os.path.join(target, future_dir))
    check_exactly_once(producer, read_all(jbod_broker.bootstrap, topic, 1))


def test_alter_replica_log_dirs_errors(jbod_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"errors-{uuid.uuid4().hex[:6]}"
    jbod_broker.create_topic(topic, partitions=1)
    home, other = _dir_of(jbod_broker, topic, 0), next(d for d in _dirs(jbod_broker) if d != _dir_of(jbod_broker, topic, 0))
    request = A(dirs=[
        A.AlterReplicaLogDir(path=str(tmp_path / "not-a-log-dir"), topics=[A.AlterReplicaLogDirTopic(name=topic, partitions=[0])]),
        A.AlterReplicaLogDir(path=other, topics=[A.AlterReplicaLogDirTopic(name=topic, partitions=[5]),
                                                 A.AlterReplicaLogDirTopic(name="no-such-topic", partitions=[0])]),
    ])
    results = {(t.topic_name, p.partition_index): p.error_code
               for t in jbod_broker.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, request).results for p in t.partitions}
    assert results == {(topic, 0): Errors.LOG_DIR_NOT_FOUND, (topic, 5): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                       ("no-such-topic", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    same = A(dirs=[A.AlterReplicaLogDir(path=home, topics=[A.AlterReplicaLogDirTopic(name=topic, partitions=[0])])])
    (result,) = jbod_broker.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, same).results
    assert result.partitions[0].error_code == 0 and _dir_of(jbod_broker, topic, 0) == home
