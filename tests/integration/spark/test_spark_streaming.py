"""readStream.format("kafka-log") on the log dir of a broker being written, with Spark's exactly-once file sink.

One module fixture runs one broker and a steady producer (confluent-kafka: an idempotent
producer, a transactional one that aborts every third transaction, a compacted topic, a topic
created while the query runs) while export_stream, a driver of its own, appends to a file sink;
the driver is killed (SIGKILL, its whole process group) and restarted twice, then the producer
stops and a last run (Trigger.AvailableNow) drains the log. Every assertion reads that one run.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException

from spark_jobs.session import REPO_ROOT
from storage.checkpoints import OffsetCheckpointFile
from tests.harness.broker import BrokerProcess
from tests.harness.spark_cluster import SparkStandaloneCluster, spark_bin
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

BROKER_OVERRIDES = {
    "log.segment.bytes": str(32 * 1024),
    "replica.high.watermark.checkpoint.interval.ms": "200",
    "log.retention.check.interval.ms": "300",
    "log.flush.start.offset.checkpoint.interval.ms": "300",
    "log.cleaner.backoff.ms": "300",
    "log.retention.ms": "-1",
}
COMPACTED_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
                    "min.compaction.lag.ms": "0"}
PATTERN = "events.*|txn|compacted"
DRIVER_TIMEOUT_S = 240
KILLS = 2


@dataclass
class Produced:
    """What the producers got acknowledged: (topic, partition) -> {offset: value}."""

    acked: dict[tuple[str, int], dict[int, bytes]] = field(default_factory=dict)
    aborted: set[bytes] = field(default_factory=set)
    keys: dict[bytes, bytes] = field(default_factory=dict)  # compacted topic: value -> key
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, msg: Any) -> None:
        with self.lock:
            self.acked.setdefault((msg.topic(), msg.partition()), {})[msg.offset()] = msg.value()


class SteadyProducers:
    """An idempotent producer (events, events-late, compacted) and a transactional one (txn), until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.produced = Produced()
        self.topics = ["events", "compacted"]
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._guarded, args=(work,), daemon=True)
                         for work in (self._plain, self._transactions)]

    def _guarded(self, work: Any) -> None:
        try:
            work()
        except Exception as exc:  # the test fails on it in stop()
            self.errors.append(f"{work.__name__}: {exc!r}")

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.produced.add(msg)

    def _plain(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        n = 0
        while not self._stop.is_set():
            for topic in list(self.topics):
                value = b"%s:%d" % (topic.encode(), n)
                key = b"k%d" % (n % 25)
                if topic == "compacted":
                    self.produced.keys[value] = key
                producer.produce(topic, value, key, on_delivery=self._delivered)
            n += 1
            producer.poll(0)
            if n % 10 == 0:
                producer.flush(10)
                self._stop.wait(0.1)
        assert producer.flush(30) == 0

    def _transactions(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
                             "linger.ms": 5})
        producer.init_transactions(30)
        n = 0
        while not self._stop.is_set():
            producer.begin_transaction()
            abort = n % 3 == 2
            values = [b"txn:%d:%d" % (n, i) for i in range(8)]
            for i, value in enumerate(values):
                producer.produce("txn", value, b"k%d" % i, partition=n % 2,
                                 on_delivery=None if abort else self._delivered)
            if abort:
                producer.flush(10)
                producer.abort_transaction(30)
                self.produced.aborted.update(values)
            else:
                producer.commit_transaction(30)
            n += 1
            self._stop.wait(0.05)

    def __enter__(self) -> SteadyProducers:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        assert not self.errors, self.errors[:5]

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()  # on the way out of a failure too; a clean stop() came before


@dataclass(frozen=True)
class StreamRun:
    broker: BrokerProcess
    log_dir: Path
    sink: Path
    checkpoint: Path
    produced: Produced
    kills: list[int]  # committed micro-batches when each kill came


def export_stream_command(log_dir: Path, sink: Path, checkpoint: Path, *extra: str) -> list[str]:
    return ["--log-dirs", str(log_dir), "--output", str(sink), "--checkpoint", str(checkpoint),
            "--topic-pattern", PATTERN, "--starting-offsets", "earliest", "--isolation-level", "read_committed",
            "--trigger-seconds", "1", "--no-progress", *extra]


def _driver(args: list[str], cwd: Path) -> tuple[subprocess.Popen[bytes], Path]:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, PYSPARK_PYTHON=sys.executable)
    log_path = cwd / f"driver-{uuid.uuid4().hex[:6]}.log"
    with open(log_path, "wb") as log:
        # A session of its own: the kill takes the driver's JVM (a child) with it, as a machine crash would.
        process = subprocess.Popen([sys.executable, "-m", "spark_jobs.export_stream", *args, "--master", "local[2]"],
                                   cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return process, log_path


def _wait_while_running(driver: subprocess.Popen[bytes], log_path: Path, condition: Any, what: str) -> None:
    try:
        wait_for(lambda: driver.poll() is not None or condition(), what, timeout=DRIVER_TIMEOUT_S)
    finally:
        if driver.poll() is not None or not condition():
            print(f"--- driver log ({log_path}) ---\n{log_path.read_text(errors='replace')[-4000:]}")
    assert driver.poll() is None, f"the driver exited with {driver.returncode}"


def _last_committed_offsets(checkpoint: Path) -> str:
    """The source offsets of the last committed micro-batch, as the offset log holds them."""
    last = _commits(checkpoint) - 1
    return (checkpoint / "offsets" / str(last)).read_text() if last >= 0 else ""


def _commits(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def _checkpointed(log_dir: Path, tp: tuple[str, int]) -> int:
    """The high watermark the broker last checkpointed for ``tp`` (0 before its first checkpoint)."""
    path = log_dir / "replication-offset-checkpoint"
    return OffsetCheckpointFile(str(path), create=False).read().get(tp, 0) if path.exists() else 0


def _high_watermarks_reached(log_dir: Path, produced: Produced) -> bool:
    """Whether the broker's checkpointed high watermarks cover every acknowledged record."""
    with produced.lock:
        last = {tp: max(offsets) for tp, offsets in produced.acked.items()}
    return all(_checkpointed(log_dir, tp) > offset for tp, offset in last.items())


def _run_to_end(args: list[str], cwd: Path) -> None:
    driver, log_path = _driver([*args, "--available-now"], cwd)
    try:
        code = driver.wait(DRIVER_TIMEOUT_S)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    assert code == 0, log_path.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def streamed(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamRun]:
    base = tmp_path_factory.mktemp("stream")
    broker = BrokerProcess(shared_zookeeper.connect_string_with_chroot(f"stream-{uuid.uuid4().hex[:10]}"), 0, base,
                           BROKER_OVERRIDES)
    broker.start()
    drivers: list[subprocess.Popen[bytes]] = []
    try:
        broker.create_topic("events", 2)
        broker.create_topic("txn", 2)
        broker.create_topic("compacted", 1, configs=COMPACTED_CONFIG)
        sink, checkpoint = base / "sink", base / "checkpoint"
        args = export_stream_command(broker.log_dir, sink, checkpoint)
        kills = []
        with SteadyProducers(broker.bootstrap) as producers:
            for run in range(KILLS):
                driver, log_path = _driver(args, base)
                drivers.append(driver)
                before = _commits(checkpoint)
                _wait_while_running(driver, log_path, lambda: _commits(checkpoint) > before, "a micro-batch committed")
                if run == 0:
                    broker.create_topic("events-late", 3)  # matches the pattern while the query runs
                    producers.topics.append("events-late")
                    _wait_while_running(driver, log_path, lambda: "events-late" in _last_committed_offsets(checkpoint),
                                        "a committed micro-batch with events-late")
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)
                kills.append(_commits(checkpoint))
            producers.stop()
        wait_for(lambda: _high_watermarks_reached(broker.log_dir, producers.produced), "high watermark checkpoint",
                 timeout=120)
        _run_to_end(args, base)
        yield StreamRun(broker, broker.log_dir, sink, checkpoint, producers.produced, kills)
    except BaseException:
        print(f"--- broker log ---\n{broker.log_tail(100)}")
        raise
    finally:
        for driver in drivers:  # still running only when the fixture failed
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)
        broker.stop()


def _sink_files_in_batch_order(sink: Path) -> list[Path]:
    """The sink's files as its _spark_metadata log lists them, batch by batch (what a reader sees)."""
    files = []
    metadata = sink / "_spark_metadata"
    for batch in sorted((p for p in metadata.iterdir() if p.name.split(".")[0].isdigit()),
                        key=lambda p: int(p.name.split(".")[0])):
        for line in batch.read_text().splitlines()[1:]:
            files.append(Path(json.loads(line)["path"].removeprefix("file://").removeprefix("file:")))
    return files


def sink_rows(sink: Path) -> list[tuple[str, int, int, bytes]]:
    rows = []
    for path in _sink_files_in_batch_order(sink):
        table = pq.read_table(str(path), columns=["topic", "partition", "offset", "value"])
        rows += zip(*(table.column(c).to_pylist() for c in ("topic", "partition", "offset", "value")))
    return rows


def expected_rows(produced: Produced) -> set[tuple[str, int, int, bytes]]:
    return {(t, p, o, v) for (t, p), offsets in produced.acked.items() if t != "compacted"
            for o, v in offsets.items()}


def check_sink(rows: list[tuple[str, int, int, bytes]], produced: Produced) -> None:
    keys = [(t, p, o) for t, p, o, _v in rows]
    assert len(keys) == len(set(keys)), "a record landed twice"
    by_partition: dict[tuple[str, int], list[int]] = {}
    for t, p, o, _v in rows:
        by_partition.setdefault((t, p), []).append(o)
    for tp, offsets in by_partition.items():
        assert offsets == sorted(offsets), f"{tp} out of offset order"
    assert not {v for *_r, v in rows} & produced.aborted, "an aborted record was read"
    assert {r for r in rows if r[0] != "compacted"} == expected_rows(produced)
    # compacted: whatever was read is what was produced at that offset, and each key's last value is there
    compacted = produced.acked[("compacted", 0)]
    read = {o: v for t, _p, o, v in rows if t == "compacted"}
    assert all(compacted[o] == v for o, v in read.items())
    last_per_key: dict[bytes, int] = {}
    for offset, value in sorted(compacted.items()):
        last_per_key[produced.keys[value]] = offset
    assert set(last_per_key.values()) <= set(read)


def test_every_committed_record_once_in_order_across_driver_kills(streamed: StreamRun) -> None:
    assert len(streamed.kills) == KILLS and 0 < streamed.kills[0] < streamed.kills[1]
    produced = streamed.produced
    assert {("events-late", p) for p in range(3)} <= set(produced.acked)
    assert produced.aborted and produced.acked[("txn", 0)] and produced.acked[("txn", 1)]
    rows = sink_rows(streamed.sink)
    check_sink(rows, produced)


def _stream_once(spark: Any, log_dir: Path, sink: Path, checkpoint: Path, **options: str) -> Any:
    reader = spark.readStream.format("kafka-log").option("path", str(log_dir)).options(**options)
    query = (reader.load().select("topic", "partition", "offset", "value").writeStream.format("parquet")
             .option("path", str(sink)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(DRIVER_TIMEOUT_S)
    except StreamingQueryException:
        pass  # the caller looks at query.exception()
    return query


def _log_start(log_dir: Path, topic: str) -> int:
    return min(int(p.name.split(".")[0]) for p in (log_dir / f"{topic}-0").glob("*.log"))


def test_retention_of_unread_offsets_with_fail_on_data_loss_both_ways(spark: Any, streamed: StreamRun,
                                                                      tmp_path: Path) -> None:
    broker, log_dir = streamed.broker, streamed.log_dir
    broker.create_topic("retained", 1, configs={"segment.bytes": "4096"})
    # batches well under the topic's 4 KiB segments (a larger one is refused as RECORD_BATCH_TOO_LARGE)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 1000})
    errors: list[str] = []

    def produce(start: int) -> int:
        for n in range(start, start + 400):
            producer.produce("retained", b"r:%d" % n, on_delivery=lambda err, _m: err and errors.append(str(err)))
        assert producer.flush(30) == 0 and not errors, errors[:3]
        return start + 400

    end = produce(0)
    wait_for(lambda: _checkpointed(log_dir, ("retained", 0)) >= end, "high watermark of retained", timeout=120)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    options = {"topics": "retained", "startingOffsets": "earliest"}
    _stream_once(spark, log_dir, sink, checkpoint, **options)
    assert len(spark.read.parquet(str(sink)).collect()) == end
    end = produce(end)
    # DeleteRecords up to offset 600: the broker deletes the segments below, unread by the query
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([KafkaTopicPartition("retained", 0, 600)]).values():
        future.result(30)
    wait_for(lambda: _log_start(log_dir, "retained") > 400, "segments below 600 deleted", timeout=120)
    wait_for(lambda: _checkpointed(log_dir, ("retained", 0)) >= end, "high watermark of retained", timeout=120)
    lenient = tmp_path / "checkpoint-lenient"
    shutil.copytree(checkpoint, lenient)
    shutil.copytree(sink, tmp_path / "sink-lenient")

    failed = _stream_once(spark, log_dir, sink, checkpoint, **options)
    assert failed.exception() is not None
    assert "retained-0: offsets 400 to" in str(failed.exception())
    assert "failOnDataLoss" in str(failed.exception())

    _stream_once(spark, log_dir, tmp_path / "sink-lenient", lenient, failOnDataLoss="false", **options)
    offsets = sorted(r["offset"] for r in spark.read.parquet(str(tmp_path / "sink-lenient")).collect())
    later = [o for o in offsets if o >= 400]  # what the lenient run added: from the new log start on
    assert later and later[0] >= 600 and later == list(range(later[0], end))

    # the checkpoint belongs to a query of "retained": another topic's query is refused, naming it
    other = _stream_once(spark, log_dir, tmp_path / "sink-other", lenient, topics="events",
                         startingOffsets="earliest")
    assert "does not subscribe to: retained" in str(other.exception())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    spark_cluster = SparkStandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), cores=1, workers=2)
    spark_cluster.start()
    try:
        yield spark_cluster
    finally:
        spark_cluster.stop()


@pytest.fixture
def submitted() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The test's spark-submit drivers; any still running at the end (a failed test) is killed."""
    drivers: list[subprocess.Popen[bytes]] = []
    yield drivers
    for driver in drivers:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)


def _submit(job: str, args: list[str], cwd: Path, master: str) -> subprocess.Popen[bytes]:
    # The job ships its packages to the executors itself; PYTHONPATH makes the tested checkout's code
    # win over an installed copy in the driver's Python workers (the stream source's planner runs there).
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=REPO_ROOT)
    with open(cwd / f"{job}.log", "ab") as log:
        return subprocess.Popen([str(spark_bin("spark-submit")), "--master", master, "--executor-memory", "512m",
                                 "--conf", "spark.ui.enabled=false", os.path.join(REPO_ROOT, "spark_jobs", f"{job}.py"),
                                 *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def test_on_a_two_worker_standalone_cluster(streamed: StreamRun, cluster: SparkStandaloneCluster,
                                            submitted: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    """spark-submit onto two workers: the driver killed mid-stream, resubmitted to the end; and the
    streaming topic_stats on the same log dir."""
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    args = export_stream_command(streamed.log_dir, sink, checkpoint, "--max-offsets-per-trigger", "40000")
    driver = _submit("export_stream", args, tmp_path, cluster.master_url)
    submitted.append(driver)
    wait_for(lambda: driver.poll() is not None or _commits(checkpoint) >= 1, "a micro-batch on the cluster",
             timeout=DRIVER_TIMEOUT_S)
    assert driver.poll() is None, (tmp_path / "export_stream.log").read_text()[-3000:]
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(30)
    resumed = _submit("export_stream", [*args, "--available-now"], tmp_path, cluster.master_url)
    submitted.append(resumed)
    assert resumed.wait(DRIVER_TIMEOUT_S) == 0, (tmp_path / "export_stream.log").read_text()[-3000:]
    stats = tmp_path / "stats"
    # one application at a time: each takes every core of the cluster
    counted = _submit("topic_stats_stream", ["--log-dirs", str(streamed.log_dir), "--output", str(stats),
                                             "--checkpoint", str(tmp_path / "stats-checkpoint"), "--topic-pattern",
                                             PATTERN, "--starting-offsets", "earliest", "--isolation-level",
                                             "read_committed", "--available-now", "--no-progress"],
                      tmp_path, cluster.master_url)
    submitted.append(counted)
    assert counted.wait(DRIVER_TIMEOUT_S) == 0, (tmp_path / "topic_stats_stream.log").read_text()[-3000:]
    read = sink_rows(sink)
    check_sink(read, streamed.produced)
    # read from the start after the cleaner ran: the compacted topic's offsets have gaps
    compacted_offsets = sorted(o for t, _p, o, _v in read if t == "compacted")
    assert compacted_offsets and len(compacted_offsets) < compacted_offsets[-1] + 1
    # both ran on the two workers' executors
    assert len({p.parent.parent.parent for p in cluster.work_dir.glob("*/app-*/*/stderr")}) == 2
    per_minute = pq.read_table(str(stats / "per_minute")).to_pylist()
    counts: dict[str, int] = {}
    for row in per_minute:
        counts[row["topic"]] = counts.get(row["topic"], 0) + row["records"]
    assert counts == {t: sum(1 for r in read if r[0] == t) for t in {r[0] for r in read}}
    assert (stats / "traffic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
