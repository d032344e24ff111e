"""consumer_offsets on a __consumer_offsets log a real broker's group coordinator wrote.

A module fixture starts one broker, produces to a 2-partition topic, and commits offsets the
ways clients do: a subscribed confluent-kafka group member committing twice (then leaving), a
simple consumer (assign(), no membership) committing once, and a second member group that is
deleted through the admin API once its member left. The job must give back exactly that history,
in order, the group's metadata records, and each partition's lag against its log end offset.
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_jobs import consumer_offsets
from tests.harness.broker import broker_for_workload
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.spark.test_spark_on_broker_data import MASTER

pytestmark = pytest.mark.integration

TOPIC = "orders"
RECORDS = {0: 300, 1: 200}  # per partition
MEMBER_GROUP, SIMPLE_GROUP, DELETED_GROUP = "member-group", "simple-group", "deleted-group"
# (group, partition, offset) in the order each group commits; the deleted group's commits come
# back as one tombstone per partition it had committed.
MEMBER_COMMITS = [(MEMBER_GROUP, 0, 100), (MEMBER_GROUP, 1, 50), (MEMBER_GROUP, 0, 250), (MEMBER_GROUP, 1, 200)]
SIMPLE_COMMITS = [(SIMPLE_GROUP, 1, 120)]
DELETED_COMMITS = [(DELETED_GROUP, 0, 7)]


@dataclass(frozen=True)
class OffsetsLog:
    log_dir: Path


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in RECORDS.items():
        for n in range(count):
            producer.produce(TOPIC, value=b"v-%d" % n, partition=partition)
    assert producer.flush(30) == 0


def _commit(consumer: Consumer, commits: list[tuple[str, int, int]]) -> None:
    for _group, partition, offset in commits:
        result = consumer.commit(offsets=[TopicPartition(TOPIC, partition, offset)], asynchronous=False)
        assert [tp.error for tp in result] == [None]


def _member_commits(bootstrap: str, group: str, commits: list[tuple[str, int, int]]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "partition.assignment.strategy": "range", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([TOPIC])
        for _ in range(300):  # until the group is Stable and both partitions are ours
            consumer.poll(0.1)
            if len(consumer.assignment()) == len(RECORDS):
                break
        assert len(consumer.assignment()) == len(RECORDS)
        _commit(consumer, commits)
    finally:
        consumer.close()  # LeaveGroup: the group becomes Empty, another metadata record


def _simple_commits(bootstrap: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": SIMPLE_GROUP, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in RECORDS])
        _commit(consumer, SIMPLE_COMMITS)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def offsets_log(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OffsetsLog]:
    with broker_for_workload(shared_zookeeper.connect_string_with_chroot(f"spark-offsets-{uuid.uuid4().hex[:12]}"),
                             tmp_path_factory.mktemp("offsets-broker"), {"offsets.topic.num.partitions": "5"}) as broker:
        broker.create_topic(TOPIC, len(RECORDS))
        _produce(broker.bootstrap)
        _member_commits(broker.bootstrap, MEMBER_GROUP, MEMBER_COMMITS)
        _simple_commits(broker.bootstrap)
        _member_commits(broker.bootstrap, DELETED_GROUP, DELETED_COMMITS)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_consumer_groups([DELETED_GROUP], request_timeout=30).values():
            future.result(30)
    yield OffsetsLog(broker.log_dir)
    shutil.rmtree(broker.dir, ignore_errors=True)


def _run_job(offsets_log: OffsetsLog, out: Path) -> None:
    assert consumer_offsets.main(["--log-dirs", str(offsets_log.log_dir), "--output", str(out), *MASTER]) == 0


def test_history_is_every_commit_in_order(spark: Any, offsets_log: OffsetsLog, tmp_path: Path) -> None:
    out = tmp_path / "offsets"
    _run_job(offsets_log, out)
    rows = spark.read.parquet(str(out / "history")).collect()
    assert {r["topic"] for r in rows} == {TOPIC}
    by_group: dict[str, list[tuple[Any, ...]]] = {}
    for r in sorted(rows, key=lambda r: (r["group"], r["coordinatorPartition"], r["recordOffset"])):
        by_group.setdefault(r["group"], []).append((r["group"], r["partition"], r["committedOffset"], r["deleted"]))
    assert by_group == {
        MEMBER_GROUP: [(g, p, o, False) for g, p, o in MEMBER_COMMITS],
        SIMPLE_GROUP: [(g, p, o, False) for g, p, o in SIMPLE_COMMITS],
        DELETED_GROUP: [(g, p, o, False) for g, p, o in DELETED_COMMITS]
        + [(g, p, None, True) for g, p, _o in DELETED_COMMITS],
    }
    # every commit of a group went to its one coordinator partition
    assert all(len({r["coordinatorPartition"] for r in rows if r["group"] == g}) == 1 for g in by_group)


def test_group_metadata_records(spark: Any, offsets_log: OffsetsLog, tmp_path: Path) -> None:
    out = tmp_path / "offsets"
    _run_job(offsets_log, out)
    groups = sorted(spark.read.parquet(str(out / "groups")).collect(),
                    key=lambda r: (r["group"], r["recordOffset"]))
    def records(group: str) -> list[tuple[Any, ...]]:
        return [(r["protocolType"], r["generation"], r["protocol"], r["members"], r["deleted"])
                for r in groups if r["group"] == group]

    # Stable with its one member (generation 1), then Empty after the member left (generation 2)
    lifecycle = [("consumer", 1, "range", 1, False), ("consumer", 2, None, 0, False)]
    assert records(MEMBER_GROUP) == lifecycle
    # deleted once Empty: a tombstone follows (Kafka writes none for generation 0, i.e. for
    # groups that only ever stored offsets, like the simple consumer's, which has no record at all)
    assert records(DELETED_GROUP) == lifecycle + [(None, None, None, None, True)]
    assert records(SIMPLE_GROUP) == []


def test_lag_against_the_log_end_offsets(spark: Any, offsets_log: OffsetsLog, tmp_path: Path) -> None:
    out = tmp_path / "offsets"
    _run_job(offsets_log, out)
    lag = {(r["group"], r["partition"]): (r["committedOffset"], r["logEndOffset"], r["lag"])
           for r in spark.read.parquet(str(out / "lag")).collect()}
    latest = {(g, p): o for g, p, o in MEMBER_COMMITS + SIMPLE_COMMITS}
    assert lag == {key: (offset, RECORDS[key[1]], RECORDS[key[1]] - offset) for key, offset in latest.items()}
