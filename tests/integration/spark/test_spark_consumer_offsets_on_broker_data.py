"""consumer_offsets, and the kafka-log source at read_committed, on logs a real broker wrote.

A module fixture starts one broker, produces to a 2-partition topic, and commits offsets the
ways clients do: a subscribed confluent-kafka group member committing twice (then leaving), a
simple consumer (assign(), no membership) committing once, a second member group that is
deleted through the admin API once its member left, and a consume-transform-produce group whose
offsets confluent-kafka and kafka-python transactional producers send to their transactions
(committed, aborted, committed), writing to a transactional topic, where one transaction is left
open when the broker stops. The job must give back exactly the committed history, in order (the
transactional commits with their producer's id, the aborted one not at all), the group's
metadata records, and each partition's lag against its log end offset; the source must return
exactly the committed transactional records at read_committed (up to the open transaction), and
every record at read_uncommitted.
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
from tests.harness.broker import BrokerProcess, broker_for_workload
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.spark.test_spark_on_broker_data import MASTER
from tests.integration.transactions.txn_helpers import describe

pytestmark = pytest.mark.integration

TOPIC = "orders"
RECORDS = {0: 300, 1: 200}  # per partition
MEMBER_GROUP, SIMPLE_GROUP, DELETED_GROUP = "member-group", "simple-group", "deleted-group"
# (group, partition, offset) in the order each group commits; the deleted group's commits come
# back as one tombstone per partition it had committed.
MEMBER_COMMITS = [(MEMBER_GROUP, 0, 100), (MEMBER_GROUP, 1, 50), (MEMBER_GROUP, 0, 250), (MEMBER_GROUP, 1, 200)]
SIMPLE_COMMITS = [(SIMPLE_GROUP, 1, 120)]
DELETED_COMMITS = [(DELETED_GROUP, 0, 7)]
TXN_TOPIC, TXN_GROUP = "payments", "copy-group"
# (library, commit?, the transaction's values (to TXN_TOPIC partition i % 2), the input offsets it commits)
TRANSACTIONS = [
    ("confluent", True, [b"c1-0", b"c1-1", b"c1-2"], {0: 30}),
    ("confluent", False, [b"a-0", b"a-1"], {0: 60}),
    ("kafka_python", True, [b"c2-0", b"c2-1"], {1: 40}),
]
OPEN_VALUES = [b"open-0"]  # in a transaction still open when the broker stops (partition 0)
TXN_COMMITS = [(TXN_GROUP, p, o) for _lib, commit, _v, offsets in TRANSACTIONS if commit for p, o in offsets.items()]


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


def _transactions(broker: BrokerProcess) -> Any:
    """The TRANSACTIONS, then one left open; returns the producer holding it open (to close after the broker)."""
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KafkaPythonTopicPartition

    bootstrap = broker.bootstrap
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": TXN_GROUP})  # for its group metadata only
    confluent = Producer({"bootstrap.servers": bootstrap, "transactional.id": "spark-copier"})
    confluent.init_transactions(30)
    for library, commit, values, offsets in TRANSACTIONS:
        if library == "kafka_python":
            producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="spark-copier-2")
            producer.init_transactions()
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.send(TXN_TOPIC, value, partition=i % 2)
            producer.send_offsets_to_transaction(
                {KafkaPythonTopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                TXN_GROUP)
            producer.commit_transaction() if commit else producer.abort_transaction()
            producer.close(10)
            # EndTxn is answered before the markers are written: they must be on disk before the broker stops.
            state = "CompleteCommit" if commit else "CompleteAbort"
            wait_for(lambda: describe(broker, "spark-copier-2").transaction_state == state, "the markers", 30)
            continue
        confluent.begin_transaction()
        for i, value in enumerate(values):
            confluent.produce(TXN_TOPIC, value, partition=i % 2)
        confluent.send_offsets_to_transaction([TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                                              consumer.consumer_group_metadata(), 30)
        confluent.flush(30)
        (confluent.commit_transaction if commit else confluent.abort_transaction)(30)
    consumer.close()
    confluent.begin_transaction()  # waits for the markers of the last commit: they are on disk
    for value in OPEN_VALUES:
        confluent.produce(TXN_TOPIC, value, partition=0)
    assert confluent.flush(30) == 0
    return confluent


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
        broker.create_topic(TXN_TOPIC, 2)
        holding_open = _transactions(broker)
    del holding_open  # after the broker: the transaction stays open in the log it left
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
        TXN_GROUP: [(g, p, o, False) for g, p, o in TXN_COMMITS],  # the aborted transaction's commit is not there
        DELETED_GROUP: [(g, p, o, False) for g, p, o in DELETED_COMMITS]
        + [(g, p, None, True) for g, p, _o in DELETED_COMMITS],
    }
    # every commit of a group went to its one coordinator partition
    assert all(len({r["coordinatorPartition"] for r in rows if r["group"] == g}) == 1 for g in by_group)
    # transactional commits carry their producer's id (two producers), the coordinator's own none
    assert len({r["producerId"] for r in rows if r["group"] == TXN_GROUP} - {-1}) == 2
    assert {r["producerId"] for r in rows if r["group"] != TXN_GROUP} == {-1}


def test_every_attempt_at_read_uncommitted(spark: Any, offsets_log: OffsetsLog, tmp_path: Path) -> None:
    out = tmp_path / "offsets"
    assert consumer_offsets.main(["--log-dirs", str(offsets_log.log_dir), "--output", str(out), *MASTER,
                                  "--isolation-level", "read_uncommitted"]) == 0
    rows = spark.read.parquet(str(out / "history")).where(f"group = '{TXN_GROUP}'").collect()
    assert sorted((r["partition"], r["committedOffset"]) for r in rows) == sorted(
        (p, o) for _lib, _commit, _v, offsets in TRANSACTIONS for p, o in offsets.items())


def test_kafka_log_source_reads_committed_transactions(spark: Any, offsets_log: OffsetsLog) -> None:
    def values(isolation: str) -> dict[int, list[bytes]]:
        rows = spark.read.format("kafka-log").option("topics", TXN_TOPIC).option("isolation.level", isolation) \
            .load(str(offsets_log.log_dir)).orderBy("partition", "offset").collect()
        read: dict[int, list[bytes]] = {0: [], 1: []}
        for row in rows:
            read[row["partition"]].append(bytes(row["value"]))
        return read

    def written(kept: Any) -> dict[int, list[bytes]]:
        expected: dict[int, list[bytes]] = {0: [], 1: []}
        for _lib, commit, txn_values, _offsets in TRANSACTIONS:
            for i, value in enumerate(txn_values):
                if kept(commit):
                    expected[i % 2].append(value)
        return expected

    assert values("read_committed") == written(lambda commit: commit)  # never the abort, nor the open one
    everything = written(lambda commit: True)
    everything[0] += OPEN_VALUES
    assert values("read_uncommitted") == everything  # data records only: no markers


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
    latest = {(g, p): o for g, p, o in MEMBER_COMMITS + SIMPLE_COMMITS + TXN_COMMITS}
    assert lag == {key: (offset, RECORDS[key[1]], RECORDS[key[1]] - offset) for key, offset in latest.items()}
