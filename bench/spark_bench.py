"""Records/s and MB/s reading Kafka segments directly with Spark (kafka-log source, local[2]).

Without --bootstrap or --broker it writes a topic's segments itself (through storage.log.Log)
and reads them. With --broker it starts a ZooKeeper and a broker (tests/harness), produces
--records values of --value-size bytes through the broker with confluent-kafka, then reads
them both ways in the same run. With --bootstrap and --log-dirs it does the same on a broker
already running. Both ways: directly from the broker's log dirs (count plus a sum over the
values), and through the broker with a confluent-kafka consumer (assign(), from the
beginning), so the two numbers are comparable (goal: the direct read is faster). Both count the
same records and key+value bytes (the run fails if they differ). Timed: for Spark each read from
building the DataFrame to its result (planning and the job; the session, started once before,
is not), for the consumer from assign() to its last record (client creation and the metadata
request before it are not). Each side first reads ``--warmups`` times, shown but not counted (for Spark the
JVM's JIT and the Python workers' start; the first read of a session took 10-35 s here).

    python bench/spark_bench.py [--records N] [--codec lz4] [--master local[2]]
    python bench/spark_bench.py --broker [--records N] [--partitions P]
    python bench/spark_bench.py --bootstrap localhost:9092 --log-dirs /var/kafka-logs --topic T

Numbers are for comparison on one machine; nothing asserts them.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from protocol.records.builder import RecordBatchBuilder  # noqa: E402
from protocol.records.compression import CompressionType  # noqa: E402
from bench import bench_json  # noqa: E402
from spark_jobs.session import create_session  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402
from bench.broker_bench import create_topic, produce  # noqa: E402
from tests.harness.broker import BrokerProcess  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

WORDS = [b"order", b"invoice", b"customer", b"amount", b"status", b"shipped", b"EUR", b"42", b"true", b"null"]


def write_topic(log_dir: str, topic: str, records: int, value_size: int, batch_records: int, codec: int,
                segment_bytes: int) -> int:
    """Segments of ``topic``-0 holding ``records`` records; returns the bytes on disk."""
    rng = random.Random(7)
    log = Log(os.path.join(log_dir, f"{topic}-0"), LogConfig(segment_bytes=segment_bytes))
    timestamp = 1_700_000_000_000
    written = 0
    while written < records:
        builder = RecordBatchBuilder(compression=codec)
        for _ in range(min(batch_records, records - written)):
            value = b" ".join(rng.choice(WORDS) + b"%d" % rng.randrange(10_000) for _ in range(value_size // 6))
            builder.append(timestamp, b"key-%d" % rng.randrange(1000), value[:value_size])
            timestamp += 1
            written += 1
        log.append_as_leader(builder.build(), 0)
    size = log.size
    log.close()
    return size


def read_direct(spark, log_dirs: list[str], topic: str, max_split_bytes: int) -> tuple[int, int, float]:
    """(records, key+value bytes, seconds) of one full read through the kafka-log source."""
    start = time.perf_counter()
    row = (
        spark.read.format("kafka-log").option("topics", topic).option("maxSplitBytes", str(max_split_bytes))
        .load(log_dirs)
        .selectExpr("count(*) AS n", "sum(coalesce(length(value), 0) + coalesce(length(key), 0)) AS b")
        .first()
    )
    return row["n"], row["b"] or 0, time.perf_counter() - start


@contextmanager
def broker_with_topic(scratch: str, topic: str, partitions: int, records: int, value_size: int, codec: str,
                      segment_bytes: int) -> Iterator[tuple[str, list[str]]]:
    """A ZooKeeper and a broker holding ``records`` values produced by confluent-kafka: (bootstrap, log dirs)."""
    zookeeper = ZooKeeperServer(Path(scratch) / "zookeeper")
    zookeeper.start()
    broker = BrokerProcess(zookeeper.connect_string, 0, scratch, {"log.segment.bytes": str(segment_bytes)})
    try:
        broker.start()
        create_topic(broker.bootstrap, topic, partitions)
        config = {} if codec == "none" else {"compression.type": codec}
        seconds = produce(broker.bootstrap, topic, records, value_size, config)
        print(f"produced {records} x {value_size} B through the broker in {seconds:.1f} s "
              f"({records / seconds:,.0f} records/s)")
        yield broker.bootstrap, [str(broker.log_dir)]
    finally:
        broker.stop()
        zookeeper.close()


def read_through_broker(bootstrap: str, topic: str, expected: int) -> tuple[int, int, float]:
    """(records, key+value bytes, seconds) of reading every partition from its start with assign()."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    # assign() needs no group coordinator; group.id is only required by the client's config check
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    count = size = 0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    idle_since = time.perf_counter()
    while count < expected and time.perf_counter() - idle_since < 10:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error():
                continue
            count += 1
            size += len(message.value() or b"") + len(message.key() or b"")
            idle_since = time.perf_counter()
    elapsed = time.perf_counter() - start
    consumer.close()
    return count, size, elapsed


def report(label: str, records: int, payload: int, disk: int, seconds: float) -> None:
    print(f"{label:<32} {records:>10} records {seconds:8.2f} s {records / seconds:>12,.0f} records/s "
          f"{payload / seconds / 1e6:8.1f} MB/s payload {disk / seconds / 1e6:8.1f} MB/s on disk")


def best_of(label: str, runs: int, warmups: int, disk: int,
            read: Callable[[], tuple[int, int, float]]) -> tuple[int, int, float]:
    """Each run's numbers and the fastest run's, after ``warmups`` reads that are shown but not counted."""
    for run in range(warmups):
        records, payload, seconds = read()
        report(f"{label} warm-up {run + 1}", records, payload, disk, seconds)
    results = []
    for run in range(runs):
        results.append(read())
        report(f"{label} run {run + 1}", *results[-1][:2], disk, results[-1][2])
    best = min(results, key=lambda r: r[2])
    report(f"{label} best", best[0], best[1], disk, best[2])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=500, help="records per batch (without a broker)")
    parser.add_argument("--codec", choices=[c.name.lower() for c in CompressionType], default="none")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--max-split-bytes", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmups", type=int, default=1,
                        help="reads first, each side, shown but not counted (Spark: JVM JIT and Python workers)")
    parser.add_argument("--broker", action="store_true",
                        help="start ZooKeeper and a broker, produce --records through it, read them both ways")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of --topic (with --broker)")
    parser.add_argument("--bootstrap", help="also read --topic through this broker with confluent-kafka")
    parser.add_argument("--log-dirs", nargs="+", help="the broker's log dirs (with --bootstrap)")
    parser.add_argument("--topic", default="bench")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print("command:", shlex.join([sys.executable, *sys.argv]))

    with tempfile.TemporaryDirectory(prefix="spark-bench-") as scratch, ExitStack() as stack:
        bootstrap = args.bootstrap
        if args.broker:
            bootstrap, log_dirs = stack.enter_context(broker_with_topic(
                scratch, args.topic, args.partitions, args.records, args.value_size, args.codec, args.segment_bytes))
        elif args.log_dirs:
            log_dirs = args.log_dirs
        else:
            log_dirs = [os.path.join(scratch, "kafka-logs")]
            started = time.perf_counter()
            write_topic(log_dirs[0], args.topic, args.records, args.value_size, args.batch_records,
                        CompressionType[args.codec.upper()], args.segment_bytes)
            print(f"wrote {args.records} records in {time.perf_counter() - started:.1f} s")
        disk = sum(p.stat().st_size for d in log_dirs for p in Path(d).glob(f"{args.topic}-*/*.log"))
        spark = create_session("spark-bench", args.master, {
            "spark.ui.enabled": "false", "spark.local.dir": scratch, "spark.sql.shuffle.partitions": "2",
        }, progress=False)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            direct = best_of(f"direct {args.master}", args.runs, args.warmups, disk,
                             lambda: read_direct(spark, log_dirs, args.topic, args.max_split_bytes))
        finally:
            spark.stop()
        if bootstrap:
            consumed = best_of("confluent-kafka consumer", args.runs, args.warmups, disk,
                               lambda: read_through_broker(bootstrap, args.topic, direct[0]))
            if consumed[:2] != direct[:2]:
                raise SystemExit(f"the two reads disagree: direct {direct[:2]}, consumer {consumed[:2]} "
                                 "(records, bytes)")
            print(f"direct read / consumer: {consumed[2] / direct[2]:.2f}x the records/s")
        if args.json:
            reads = [(f"segments directly, kafka-log source on {args.master}", direct)]
            if bootstrap:
                reads.append(("through the broker, confluent-kafka consumer (assign())", consumed))
            bench_json.write(args.json, "spark_bench", "records/s",
                             [{"name": name, "value": records / seconds, "mb_per_s": size / seconds / 1e6}
                              for name, (records, size, seconds) in reads])


if __name__ == "__main__":
    main()
