"""Structured Streaming from the segments (kafka-log) against a streaming job reading through librdkafka.

Starts a ZooKeeper and a broker (tests/harness), then for each source in turn:

- throughput: ``--records`` values of ``--value-size`` bytes are produced first (a backlog), and a
  query with Trigger.AvailableNow reads them all; records/s is the backlog over the time from the
  query's start to its end (planning, reading, and the sink's count of records and value bytes),
  the fastest of ``--repeats`` reads (each a new query; the first also warms the JVM and workers);
- latency: a producer sends ``--rate`` records/s for ``--seconds`` while the query runs with a
  processing-time trigger of ``--trigger-seconds``; each record's latency is the time from its
  produce (its CreateTime timestamp) to the end of the micro-batch that read it.

The other source is a Python streaming data source of this file, ``rdkafka``: the same offsets
per partition, planned from the broker's high watermarks (ListOffsets through a consumer), each
range read in a task by a confluent-kafka consumer (assign, consume in batches of 10,000) into
Arrow batches, so both sides give Spark the same Arrow columns. Both sides' sink is the same
foreachBatch aggregate (count and value bytes; in the latency run also timestamp percentiles). ``--json`` writes the rows
for bench/charts.py (bench_json's format, with every measurement under ``sources``).

    python bench/spark_stream_bench.py [--records 200000] [--rate 2000] [--seconds 30] \\
        [--trigger-seconds 1] [--hw-interval-ms 1000] [--json out.json]

Numbers are for comparison on one machine; nothing asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from bench import bench_json  # noqa: E402
from bench.broker_bench import create_topic  # noqa: E402
from bench.rdkafka_stream_source import RdKafkaSource  # noqa: E402
from spark_jobs.session import create_session  # noqa: E402
from tests.harness.broker import BrokerProcess  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

TOPIC = "stream-bench"


class BatchTimer:
    """foreachBatch sink: per micro-batch, its records, bytes, and end time; with ``timestamps``
    also the records' timestamps (first, last, percentiles) for the latency run. The backlog read
    counts records and value bytes only, so that what both sources share in the sink (a
    percentile over a million timestamps) does not hide how fast each reads."""

    def __init__(self, timestamps: bool) -> None:
        self.timestamps = timestamps
        self.batches: list[dict[str, Any]] = []

    def __call__(self, batch: Any, batch_id: int) -> None:
        started = time.time()
        columns = [F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("bytes")]
        if self.timestamps:
            millis = F.unix_millis("timestamp")
            columns += [F.min(millis).alias("first"), F.percentile_approx(millis, [0.01, 0.5, 0.99]).alias("q"),
                        F.max(millis).alias("last")]
        row = batch.agg(*columns).first().asDict()
        ended = time.time()
        if row["n"]:
            self.batches.append({"id": batch_id, "records": row["n"], "bytes": row["bytes"], "started": started,
                                 "ended": ended, "first_ts": row.get("first"), "last_ts": row.get("last"),
                                 "ts_quantiles": row.get("q")})


def stream(spark: Any, source: str, options: dict[str, str], checkpoint: str, trigger: dict[str, Any],
           timestamps: bool) -> Any:
    reader = spark.readStream.format(source).options(**options).load().select("value", "timestamp")
    timer = BatchTimer(timestamps)
    query = reader.writeStream.foreachBatch(timer).option("checkpointLocation", checkpoint).trigger(**trigger).start()
    return query, timer


def produce_backlog(bootstrap: str, records: int, value_size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000, "compression.type": "none"})
    value = b"v" * value_size
    for n in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, b"%d" % (n % 1000))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def produce_steady(bootstrap: str, rate: int, seconds: float, value_size: int, done: threading.Event) -> int:
    """``rate`` records/s in ticks of 10 ms, each record's timestamp its produce time."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"v" * value_size
    began = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - began) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            producer.produce(TOPIC, value, b"%d" % (sent % 1000))
            sent += 1
        producer.poll(0)
        time.sleep(0.01)
    producer.flush(60)
    done.set()
    return sent


def latencies(batches: list[dict[str, Any]]) -> dict[str, float]:
    """Per-record latency quantiles, weighting each batch's timestamp quantiles by its records."""
    samples: list[tuple[float, int]] = []
    for b in batches:
        for ts in (b["first_ts"], *b["ts_quantiles"], b["last_ts"]):
            samples.append((b["ended"] * 1000 - ts, b["records"]))
    samples.sort()
    total = sum(w for _l, w in samples)

    def quantile(q: float) -> float:
        acc = 0
        for latency, weight in samples:
            acc += weight
            if acc >= q * total:
                return round(latency)
        return round(samples[-1][0])

    return {"p50_ms": quantile(0.5), "p99_ms": quantile(0.99), "max_ms": round(max(s[0] for s in samples))}


def run_source(spark: Any, label: str, source: str, options: dict[str, str], args: argparse.Namespace,
               bootstrap: str, scratch: str, backlog_end: int) -> dict[str, Any]:
    runs = []
    for run in range(args.repeats):  # the first also warms up (JIT, Python workers)
        began = time.time()
        query, timer = stream(spark, source, options, os.path.join(scratch, f"{label}-backlog-{run}"),
                              {"availableNow": True}, timestamps=False)
        query.awaitTermination()
        runs.append(time.time() - began)
        read = sum(b["records"] for b in timer.batches)
        assert read == backlog_end, f"{label} read {read} of {backlog_end} records"
    seconds = min(runs)
    throughput = {"records": read, "seconds": round(seconds, 2), "records_per_s": round(read / seconds),
                  "all_runs_seconds": [round(r, 2) for r in runs], "micro_batches": len(timer.batches)}
    # latency: from the end of the backlog on, a steady producer while the query runs
    query, timer = stream(spark, source, {**options, "startingOffsets": "latest"},
                          os.path.join(scratch, f"{label}-steady"), {"processingTime": f"{args.trigger_seconds} seconds"},
                          timestamps=True)
    while query.lastProgress is None:  # the first trigger fixed the starting offsets
        time.sleep(0.1)
    done = threading.Event()
    sent = produce_steady(bootstrap, args.rate, args.seconds, args.value_size, done)
    deadline = time.monotonic() + 120
    while sum(b["records"] for b in timer.batches) < sent and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    got = sum(b["records"] for b in timer.batches)
    return {"throughput": throughput,
            "latency": {"produced": sent, "read": got, "rate_per_s": args.rate, **latencies(timer.batches)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="backlog for the throughput read")
    parser.add_argument("--value-size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rate", type=int, default=2000, help="records/s of the latency run")
    parser.add_argument("--seconds", type=float, default=30, help="length of the latency run")
    parser.add_argument("--trigger-seconds", type=float, default=1.0)
    parser.add_argument("--hw-interval-ms", type=int, default=1000,
                        help="the broker's replica.high.watermark.checkpoint.interval.ms")
    parser.add_argument("--repeats", type=int, default=3, help="backlog reads per source; the fastest counts")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print("command:", shlex.join([sys.executable, *sys.argv]), flush=True)
    with tempfile.TemporaryDirectory(prefix="stream-bench-") as scratch:
        zookeeper = ZooKeeperServer(Path(scratch) / "zookeeper")
        zookeeper.start()
        broker = BrokerProcess(zookeeper.connect_string, 0, scratch,
                               {"replica.high.watermark.checkpoint.interval.ms": str(args.hw_interval_ms),
                                "log.segment.bytes": str(64 * 1024 * 1024)})
        broker.start()
        spark = None
        try:
            create_topic(broker.bootstrap, TOPIC, args.partitions)
            produce_backlog(broker.bootstrap, args.records, args.value_size)
            time.sleep(args.hw_interval_ms / 1000 * 2)  # the checkpoint file covers the backlog
            spark = create_session("stream-bench", args.master, {"spark.ui.enabled": "false",
                                                                 "spark.sql.shuffle.partitions": "2",
                                                                 # progress (and so the start) shows without data
                                                                 "spark.sql.streaming.noDataProgressEventInterval":
                                                                     "200ms"}, progress=False)
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(RdKafkaSource)
            sources = {
                "kafka-log": ("kafka-log", {"path": str(broker.log_dir), "topics": TOPIC,
                                            "startingOffsets": "earliest"}),
                "rdkafka": ("rdkafka", {"bootstrap": broker.bootstrap, "topic": TOPIC,
                                        "partitions": str(args.partitions), "startingOffsets": "earliest"}),
            }
            result: dict[str, Any] = {}
            backlog_end = args.records
            for label, (source, options) in sources.items():
                result[label] = run_source(spark, label, source, options, args, broker.bootstrap, scratch,
                                           backlog_end)
                backlog_end += result[label]["latency"]["produced"]
                print(label, json.dumps(result[label]), flush=True)
        finally:
            if spark is not None:
                spark.stop()
            broker.stop()
            zookeeper.close()
    ratio = result["kafka-log"]["throughput"]["records_per_s"] / result["rdkafka"]["throughput"]["records_per_s"]
    print(f"kafka-log reads the backlog {ratio:.2f}x as fast as the librdkafka stream")
    if args.json:
        rows = [{"name": "backlog read", "unit": "records/s", "higher_is_better": True,
                 "value": {s: r["throughput"]["records_per_s"] for s, r in result.items()}},
                {"name": f"produce to micro-batch end ({args.rate}/s), p50 / p99", "unit": "ms",
                 "higher_is_better": False, "value": {s: [r["latency"]["p50_ms"], r["latency"]["p99_ms"]] for s, r in result.items()}}]
        bench_json.write(args.json, "spark_stream_bench", "records/s", rows, sources=result,
                         kinds={"kafka-log": "kafka-log (segments)", "rdkafka": "librdkafka consumer"},
                         trigger_seconds=args.trigger_seconds, hw_checkpoint_interval_ms=args.hw_interval_ms,
                         records=args.records, value_size=args.value_size, partitions=args.partitions)


if __name__ == "__main__":
    main()
