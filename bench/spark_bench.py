"""Records/s and MB/s reading Kafka segments directly with Spark (kafka-log source, local[2]).

Without --bootstrap it writes a topic's segments itself (through storage.log.Log) and reads
them. With --bootstrap and --log-dirs it reads one topic both ways in the same run: directly
from the broker's log dirs, and through the broker with a confluent-kafka consumer, so the two
numbers are comparable (goal: the direct read is faster).

    python bench/spark_bench.py [--records N] [--codec lz4] [--master local[2]]
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
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from protocol.records.builder import RecordBatchBuilder  # noqa: E402
from protocol.records.compression import CompressionType  # noqa: E402
from spark_jobs.session import create_session  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402

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


def read_through_broker(bootstrap: str, topic: str, expected: int) -> tuple[int, int, float]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"spark-bench-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    count = size = 0
    start = time.perf_counter()
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
    print(f"{label:<28} {records:>10} records {seconds:8.2f} s {records / seconds:>12,.0f} records/s "
          f"{payload / seconds / 1e6:8.1f} MB/s payload {disk / seconds / 1e6:8.1f} MB/s on disk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=500)
    parser.add_argument("--codec", choices=[c.name.lower() for c in CompressionType], default="none")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--max-split-bytes", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bootstrap", help="also read --topic through this broker with confluent-kafka")
    parser.add_argument("--log-dirs", nargs="+", help="the broker's log dirs (with --bootstrap)")
    parser.add_argument("--topic", default="bench")
    args = parser.parse_args()
    print("command:", shlex.join([sys.executable, *sys.argv]))

    with tempfile.TemporaryDirectory(prefix="spark-bench-") as scratch:
        if args.log_dirs:
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
            runs = []
            for run in range(args.runs):
                runs.append(read_direct(spark, log_dirs, args.topic, args.max_split_bytes))
                report(f"direct {args.master} run {run + 1}", runs[-1][0], runs[-1][1], disk, runs[-1][2])
            best = min(runs, key=lambda r: r[2])
            report(f"direct {args.master} best", best[0], best[1], disk, best[2])
        finally:
            spark.stop()
        if args.bootstrap:
            count, size, seconds = read_through_broker(args.bootstrap, args.topic, best[0])
            report("confluent-kafka consumer", count, size, disk, seconds)


if __name__ == "__main__":
    main()
