"""spark_jobs on log dirs a real broker wrote: what real clients produced is what the jobs read.

A module fixture starts one broker (64 KiB segments) on the shared ZooKeeper, produces through
confluent-kafka (every compression.type, keys, headers, tombstones, an idempotent producer, a
LogAppendTime topic) and kafka-python (record batches, and message sets of magic 1 and 0 that
the broker up-converts), and stops the broker; the kafka-log source, topic_stats, export and
verify then run on its log dir. One more test reads the log dir of a broker still being written.
consumer_offsets on offsets committed through the broker is in
test_spark_consumer_offsets_on_broker_data.py.
"""
from __future__ import annotations

import collections
import hashlib
import mmap
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer
from kafka import KafkaProducer

from protocol.records.batch import NO_SEQUENCE
from protocol.records.log_entry import iter_log_entries
from spark_jobs import export, topic_stats, verify
from spark_jobs.planner import plan
from spark_jobs.read_options import parse_options
from spark_jobs.segment_reader import SplitReader
from tests.harness.broker import BrokerProcess, broker_for_workload
from tests.harness.zookeeper import ZooKeeperServer
from tests.unit.spark.spark_read_helpers import row_view

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 64 * 1024
BROKER_OVERRIDES = {
    "log.segment.bytes": str(SEGMENT_BYTES),
    "log.retention.ms": "-1",  # the records carry 2023 timestamps; time retention must not delete them
}
BASE_TIMESTAMP = 1_700_006_340_000  # 2023-11-14 23:59:00 UTC: the records span midnight (two export dates)
TIMESTAMP_STEP_MS = 37
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MASTER = ["--master", "local[2]", "--no-progress"]

Headers = tuple[tuple[str, Optional[bytes]], ...]


@dataclass(frozen=True)
class Sent:
    """One record as its producer sent it and the broker acknowledged it."""

    topic: str
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: Optional[int]  # ms; None for magic 0 messages, which have none
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    headers: Headers
    idempotent: bool

    def view(self) -> tuple:
        return (self.topic, self.partition, self.offset, self.key, self.value, self.timestamp, self.timestamp_type,
                self.headers)


@dataclass(frozen=True)
class BrokerData:
    log_dir: Path
    sent: list[Sent]
    codecs: dict[str, set[str]]  # per topic: the codecs its stored batches may carry

    def partition_dirs(self) -> dict[tuple[str, int], Path]:
        return {(s.topic, s.partition): self.log_dir / f"{s.topic}-{s.partition}" for s in self.sent}

    def segments(self) -> list[Path]:
        return sorted(p for d in set(self.partition_dirs().values()) for p in d.glob("*.log"))


def _message(n: int) -> tuple[Optional[bytes], Optional[bytes], Headers]:
    """Record ``n``: some without key, some tombstones (keyed), some with (repeated, empty, null) headers."""
    key = None if n % 7 == 0 else b"key-%d" % (n % 50)
    value = None if n % 11 == 0 and key is not None else b"value-%d-" % n + hashlib.sha256(b"%d" % n).hexdigest().encode() * (1 + n % 3)
    headers: Headers = ()
    if n % 3 == 0:
        headers = (("trace", b"t-%d" % n), ("empty", b""), ("trace", b"again"))
    if n % 5 == 0:
        headers += (("null", None),)
    return key, value, headers


def _timestamp(n: int) -> int:
    return BASE_TIMESTAMP + n * TIMESTAMP_STEP_MS


def _produce_confluent(bootstrap: str, topic: str, numbers: range, config: Mapping[str, Any],
                       explicit_timestamps: bool = True) -> list[Sent]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "batch.size": 16384, **config})
    idempotent = bool(config.get("enable.idempotence"))
    sent: list[Sent] = []
    errors: list[str] = []
    for n in numbers:
        key, value, headers = _message(n)

        def delivered(err: Any, msg: Any, key: Optional[bytes] = key, value: Optional[bytes] = value,
                      headers: Headers = headers) -> None:
            if err is not None:
                errors.append(str(err))
                return
            kind, timestamp = msg.timestamp()
            sent.append(Sent(topic, msg.partition(), msg.offset(), key, value, timestamp,
                             1 if kind == TIMESTAMP_LOG_APPEND_TIME else 0, headers, idempotent))

        extra = {"timestamp": _timestamp(n)} if explicit_timestamps else {}
        producer.produce(topic, value=value, key=key, headers=list(headers) or None, on_delivery=delivered, **extra)
        producer.poll(0)
    undelivered = producer.flush(30)
    assert undelivered == 0 and not errors, f"{topic}: {undelivered} undelivered, errors {errors[:3]}"
    return sent


def _produce_kafka_python(bootstrap: str, topic: str, numbers: range, **config: Any) -> list[Sent]:
    """kafka-python; with ``api_version`` below (0, 11) it sends message sets (no headers)."""
    legacy = "api_version" in config
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, **config)
    idempotent = not legacy and bool(producer.config.get("enable_idempotence"))
    pending = []
    try:
        for n in numbers:
            key, value, headers = _message(n)
            headers = () if legacy else tuple(h for h in headers if h[1] is not None)
            future = producer.send(topic, value=value, key=key, headers=list(headers) or None,
                                   timestamp_ms=_timestamp(n))
            pending.append((future, key, value, headers))
        producer.flush(30)
        sent = []
        for future, key, value, headers in pending:
            meta = future.get(30)
            timestamp = None if meta.timestamp == -1 else meta.timestamp
            sent.append(Sent(topic, meta.partition, meta.offset, key, value, timestamp, 0, headers, idempotent))
        return sent
    finally:
        producer.close(10)


def _produce_everything(broker: BrokerProcess) -> tuple[list[Sent], dict[str, set[str]]]:
    sent: list[Sent] = []
    codecs: dict[str, set[str]] = {}
    first = 0

    def numbers(count: int) -> range:
        nonlocal first
        first += count
        return range(first - count, first)

    for codec in CODECS:
        topic = f"codec-{codec}"
        broker.create_topic(topic, 2)
        count = 3000 if codec == "none" else 1500  # codec-none is the one cut into many segments
        sent += _produce_confluent(broker.bootstrap, topic, numbers(count), {"compression.type": codec})
        # librdkafka sends a batch uncompressed when compressing does not make it smaller
        codecs[topic] = {codec, "none"}
    broker.create_topic("idempotent", 2)
    sent += _produce_confluent(broker.bootstrap, "idempotent", numbers(1000),
                               {"enable.idempotence": True, "compression.type": "lz4"})
    codecs["idempotent"] = {"lz4", "none"}
    broker.create_topic("log-append-time", 1, configs={"message.timestamp.type": "LogAppendTime"})
    sent += _produce_confluent(broker.bootstrap, "log-append-time", numbers(300), {}, explicit_timestamps=False)
    codecs["log-append-time"] = {"none"}
    broker.create_topic("kafka-python", 2)
    sent += _produce_kafka_python(broker.bootstrap, "kafka-python", numbers(800), compression_type="zstd")
    codecs["kafka-python"] = {"zstd"}
    broker.create_topic("legacy-magic1", 1)
    sent += _produce_kafka_python(broker.bootstrap, "legacy-magic1", numbers(400), api_version=(0, 10),
                                  compression_type="gzip")
    codecs["legacy-magic1"] = {"gzip"}
    broker.create_topic("legacy-magic0", 1)
    sent += _produce_kafka_python(broker.bootstrap, "legacy-magic0", numbers(400), api_version=(0, 9),
                                  compression_type="snappy")
    codecs["legacy-magic0"] = {"snappy"}
    return sent, codecs


@pytest.fixture(scope="module")
def produced(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerData]:
    """The log dir of a stopped broker, and every record produced into it."""
    with broker_for_workload(shared_zookeeper.connect_string_with_chroot(f"spark-{uuid.uuid4().hex[:12]}"),
                             tmp_path_factory.mktemp("broker-data"), BROKER_OVERRIDES) as broker:
        sent, codecs = _produce_everything(broker)
    yield BrokerData(broker.log_dir, sent, codecs)
    shutil.rmtree(broker.dir, ignore_errors=True)


def _kafka_log(spark: Any, path: Path | str, **options: str) -> Any:
    return spark.read.format("kafka-log").options(**options).load(str(path))


def _views(rows: list[Any]) -> list[tuple]:
    """Rows as Sent.view() tuples (row_view without the compression column)."""
    return sorted(row_view(r.asDict(recursive=True))[:-1] for r in rows)


def test_segments_rolled(produced: BrokerData) -> None:
    """The broker really cut the partitions into several segments, so reads cross segment boundaries."""
    for partition in (0, 1):
        assert len(list((produced.log_dir / f"codec-none-{partition}").glob("*.log"))) >= 3
    assert len(produced.sent) == len({(s.topic, s.partition, s.offset) for s in produced.sent}) == 11_900


def test_source_rows_equal_what_was_produced(spark: Any, produced: BrokerData) -> None:
    rows = _kafka_log(spark, produced.log_dir).collect()
    assert _views(rows) == sorted(s.view() for s in produced.sent)
    by_topic: dict[str, list[Any]] = collections.defaultdict(list)
    for row in rows:
        by_topic[row["topic"]].append(row)
    for topic, topic_rows in by_topic.items():
        assert {r["leaderEpoch"] for r in topic_rows} == {0}, topic
        codecs = {r["compression"] for r in topic_rows}
        assert codecs <= produced.codecs[topic] and codecs - {"none"} == produced.codecs[topic] - {"none"}, topic
    # magic 1 kept the producer's timestamps, magic 0 had none to keep
    assert all(r["timestamp"] is not None for r in by_topic["legacy-magic1"])
    assert all(r["timestamp"] is None and r["timestampType"] == 0 for r in by_topic["legacy-magic0"])
    assert {r["timestampType"] for r in by_topic["log-append-time"]} == {1}


def test_producer_ids_and_sequences(spark: Any, produced: BrokerData) -> None:
    rows = _kafka_log(spark, produced.log_dir).select(
        "topic", "partition", "producerId", "batchBaseOffset").distinct().collect()
    idempotent = {s.topic for s in produced.sent if s.idempotent}
    assert "idempotent" in idempotent  # and kafka-python's topic when the client defaults to idempotence (3.x)
    producer_ids = collections.defaultdict(set)
    batch_bases = collections.defaultdict(set)
    for row in rows:
        producer_ids[row["topic"]].add(row["producerId"])
        batch_bases[(row["topic"], row["partition"])].add(row["batchBaseOffset"])
    for topic, ids in producer_ids.items():
        if topic in idempotent:
            assert len(ids) == 1 and min(ids) >= 0, (topic, ids)
        else:
            assert ids == {-1}, (topic, ids)
    assert len({min(producer_ids[t]) for t in idempotent}) == len(idempotent)  # one producer id per producer
    # The source has no sequence column: the batch headers of the same files give them.
    for (topic, partition), directory in produced.partition_dirs().items():
        headers = []
        for segment in sorted(directory.glob("*.log")):
            with open(segment, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                headers += [h for _pos, h in iter_log_entries(buf)]
        assert {h.base_offset for h in headers} == batch_bases[(topic, partition)]
        for header in headers:
            if topic in idempotent:
                # the only producer of the partition: sequence numbers count from 0 at offset 0
                assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
                    min(producer_ids[topic]), 0, header.base_offset), (topic, partition, header)
            else:
                assert header.base_sequence == NO_SEQUENCE


def test_split_and_bounded_reads(spark: Any, produced: BrokerData) -> None:
    """Splits cut at the broker's .index entries, and the high watermark it checkpointed at shutdown."""
    topics = ("codec-none", "codec-zstd")
    split = _kafka_log(spark, produced.log_dir, maxSplitBytes="16384", topics=",".join(topics))
    assert split.rdd.getNumPartitions() > 2 * len([p for p in produced.segments() if p.parent.name.rsplit('-', 1)[0] in topics])
    assert _views(split.collect()) == sorted(s.view() for s in produced.sent if s.topic in topics)
    committed = _kafka_log(spark, produced.log_dir, committedOnly="true", **{"isolation.level": "read_committed"})
    assert committed.count() == len(produced.sent)
    tail = _kafka_log(spark, produced.log_dir, topics="codec-none", startingOffsets='{"codec-none": {"0": 1000}}',
                      endingOffsets='{"codec-none": {"0": 1100}}')
    assert sorted(r["offset"] for r in tail.where("partition = 0").collect()) == list(range(1000, 1100))


def test_topic_stats(spark: Any, produced: BrokerData, tmp_path: Path) -> None:
    out = tmp_path / "stats"
    assert topic_stats.main(["--log-dirs", str(produced.log_dir), "--output", str(out), *MASTER]) == 0
    stats = {(r["topic"], r["partition"]): r for r in spark.read.parquet(str(out / "partitions")).collect()}
    by_partition: dict[tuple[str, int], list[Sent]] = collections.defaultdict(list)
    for s in produced.sent:
        by_partition[(s.topic, s.partition)].append(s)
    assert set(stats) == set(by_partition)
    dirs = produced.partition_dirs()
    for key, sent in by_partition.items():
        got = stats[key]
        assert got["records"] == len(sent), key
        assert (got["firstOffset"], got["lastOffset"]) == (0, len(sent) - 1), key
        assert got["distinctKeys"] == len({s.key for s in sent if s.key is not None}), key
        assert got["payloadBytes"] == sum(
            len(s.key or b"") + len(s.value or b"") + sum(len(k.encode()) + len(v or b"") for k, v in s.headers)
            for s in sent), key
        # every byte of the partition's segments is a data batch: no control batches without transactions
        assert got["logBytes"] == sum(p.stat().st_size for p in dirs[key].glob("*.log")), key
    compression = spark.read.parquet(str(out / "compression")).collect()
    assert {r["compression"] for r in compression} == set(CODECS)
    assert sum(r["logBytes"] for r in compression) == sum(p.stat().st_size for p in produced.segments())
    traffic = spark.read.parquet(str(out / "traffic")).groupBy().sum("records").first()[0]
    assert traffic == sum(1 for s in produced.sent if s.timestamp is not None)


def test_export_round_trip(spark: Any, produced: BrokerData, tmp_path: Path) -> None:
    out = tmp_path / "export"
    args = ["--log-dirs", str(produced.log_dir), "--output", str(out), "--decode", "utf8", *MASTER]
    assert export.main(args) == 0
    rows = spark.read.parquet(str(out)).collect()
    for row in rows:
        assert row["valueString"] == (None if row["value"] is None else row["value"].decode())
    assert sorted(row_view({**r.asDict(recursive=True), "compression": None})[:-1] for r in rows) == sorted(
        s.view() for s in produced.sent)
    dates = {(s.topic, "__HIVE_DEFAULT_PARTITION__" if s.timestamp is None else
              datetime.fromtimestamp(s.timestamp / 1000, timezone.utc).strftime("%Y-%m-%d")) for s in produced.sent}
    assert ("codec-none", "2023-11-14") in dates and ("codec-none", "2023-11-15") in dates
    assert {(t.name[len("topic="):], d.name[len("date="):]) for t in out.iterdir() if t.is_dir()
            for d in t.iterdir()} == dates
    with pytest.raises(Exception, match="already exists"):
        export.main(args)  # without --overwrite an existing dataset is kept


def test_an_entry_still_being_written_is_not_corruption(produced: BrokerData, tmp_path: Path) -> None:
    """The active segment grows between planning and reading while its last entry is still incomplete."""
    copy = tmp_path / "codec-none-1"
    shutil.copytree(produced.log_dir / "codec-none-1", copy)
    active = sorted(copy.glob("*.log"))[-1]
    data = active.read_bytes()
    position, header = list(iter_log_entries(data))[-1]
    third = header.size // 3
    active.write_bytes(data[:position + third])  # planned while the broker is writing the last batch
    options = parse_options({"path": str(copy)})
    splits = plan(options)
    with open(active, "ab") as f:
        f.write(data[position + third:position + 2 * third])  # more of it when the task reads; still torn
    rows = [row for split in splits for batch in SplitReader(split, options).read() for row in batch.to_pylist()]
    assert sorted(r["offset"] for r in rows) == list(range(header.base_offset))


def _flip_a_byte(produced: BrokerData, dest: Path) -> tuple[Path, str, int]:
    """A copy of codec-none-0 with one byte of its second segment's second batch flipped.

    Returns the copy, the damaged segment and the batch's position.
    """
    copy = dest / "codec-none-0"
    shutil.copytree(produced.log_dir / "codec-none-0", copy)
    segment = sorted(copy.glob("*.log"))[1]
    with open(segment, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        position, header = list(iter_log_entries(buf))[1]
    data = bytearray(segment.read_bytes())
    data[position + header.size - 5] ^= 0x01  # inside the last record: only the CRC can notice
    segment.write_bytes(bytes(data))
    return copy, str(segment), position


def test_verify_clean_then_a_flipped_byte(spark: Any, produced: BrokerData, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert verify.main(["--log-dirs", str(produced.log_dir), *MASTER]) == 0
    segments = len(produced.segments())
    assert f"checked {segments} segments" in capsys.readouterr().out
    copy, segment, position = _flip_a_byte(produced, tmp_path)
    with pytest.raises(Exception) as failure:
        _kafka_log(spark, copy).count()
    assert f"corrupt log segment {segment} at byte position {position}" in str(failure.value)
    report = tmp_path / "report"
    assert verify.main(["--log-dirs", str(copy), "--output", str(report), *MASTER]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{segment}:{position}: crc: record batch at position {position} failed its CRC")
    assert printed[-1].endswith(": 1 problems")  # the index entries pointing at the damaged batch are sound
    assert [(r["file"], r["position"], r["kind"]) for r in spark.read.parquet(str(report)).collect()] == [
        (segment, position, "crc")]


class _BackgroundProducer:
    """Produces to a topic from a thread until stopped, at a bounded rate; remembers what was acknowledged."""

    BURST = 10
    PAUSE_S = 0.02  # at most 500 records/s: the log keeps growing through every read, yet stays small

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.size": 4096})
        self.acked: dict[tuple[int, int], Sent] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        self.acked[(msg.partition(), msg.offset())] = Sent(
            self.topic, msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], 0, (), False)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for _ in range(self.BURST):
                key, value, _headers = _message(n)
                self.producer.produce(self.topic, value=value, key=key, timestamp=_timestamp(n),
                                      on_delivery=self._delivered)
                n += 1
            self.producer.poll(0)
            time.sleep(self.PAUSE_S)
        self.producer.flush(30)

    def wait_for_acks(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline and not self.errors, (len(self.acked), self.errors[:3])
            time.sleep(0.02)

    def __enter__(self) -> _BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(60)
        del self.producer  # librdkafka would keep reconnecting to the stopped broker


@pytest.mark.parametrize("broker", [BROKER_OVERRIDES], indirect=True)
def test_reads_the_log_dir_of_a_running_broker(spark: Any, broker: BrokerProcess) -> None:
    """Reads while the active segments grow and roll: each sees a gap-free prefix of every partition."""
    broker.create_topic("live", 2)
    snapshots = []
    with _BackgroundProducer(broker.bootstrap, "live") as background:
        for _ in range(3):
            background.wait_for_acks(len(background.acked) + 500)
            snapshots.append(_kafka_log(spark, broker.log_dir).collect())
    assert not background.errors, background.errors[:3]
    acked = background.acked
    counts = []
    for rows in snapshots:
        offsets = collections.defaultdict(list)
        for row in rows:
            offsets[row["partition"]].append(row["offset"])
        assert all(sorted(o) == list(range(len(o))) for o in offsets.values())
        assert _views(rows) == sorted(acked[(r["partition"], r["offset"])].view() for r in rows)
        counts.append(len(rows))
    assert counts == sorted(counts) and counts[0] >= 500
    # Idle now (every write acknowledged): the whole log, and sound files, active segments included.
    assert _views(_kafka_log(spark, broker.log_dir).collect()) == sorted(s.view() for s in acked.values())
    assert verify.main(["--log-dirs", str(broker.log_dir), *MASTER]) == 0
    assert len(list(broker.log_dir.glob("live-*/*.log"))) >= 3  # at least one segment rolled meanwhile
