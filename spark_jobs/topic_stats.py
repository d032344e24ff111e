"""topic_stats: per topic and partition, what the segments hold and how fast it arrived.

Writes under --output: ``partitions/`` (Parquet: records, bytes, first/last offset and
timestamp, records per minute and hour over the partition's time span, distinct keys, average
key/value size), ``compression/`` (Parquet: per topic and codec, record payload bytes over
on-disk batch bytes), ``traffic/`` (Parquet: records per time bucket and topic) and
``traffic.png``.

    python -m spark_jobs.topic_stats --log-dirs DIR [DIR ...] --output OUT [--topics T ...]
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as `spark-submit spark_jobs/topic_stats.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from typing import Any, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.cli import job_parser, job_session, read_records, run_job

BUCKETS_SECONDS = (1, 60, 3600, 86400)
MAX_CHART_POINTS = 600
MAX_CHART_TOPICS = 12


def payload_bytes() -> F.Column:
    header_bytes = F.aggregate(
        F.coalesce(F.col("headers"), F.array().cast("array<struct<key:string,value:binary>>")),
        F.lit(0),
        lambda acc, h: acc + F.coalesce(F.length(h["key"]), F.lit(0)) + F.coalesce(F.length(h["value"]), F.lit(0)),
    )
    return F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0)) + header_bytes


def partition_stats(records: DataFrame) -> DataFrame:
    span_ms = F.unix_millis(F.max("timestamp")) - F.unix_millis(F.min("timestamp"))
    stats = records.groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("records"),
        F.sum(payload_bytes()).alias("payloadBytes"),
        F.min("offset").alias("firstOffset"),
        F.max("offset").alias("lastOffset"),
        F.min("timestamp").alias("firstTimestamp"),
        F.max("timestamp").alias("lastTimestamp"),
        span_ms.alias("spanMs"),
        F.countDistinct("key").alias("distinctKeys"),
        F.avg(F.length("key")).alias("avgKeySize"),
        F.avg(F.length("value")).alias("avgValueSize"),
    )
    log_bytes = (
        records.select("topic", "partition", "batchBaseOffset", "batchSizeBytes")
        .dropDuplicates(["topic", "partition", "batchBaseOffset"])
        .groupBy("topic", "partition")
        .agg(F.sum("batchSizeBytes").alias("logBytes"))
    )
    rate = F.when(F.col("spanMs") > 0, F.col("records") / F.col("spanMs"))
    return (
        stats.join(log_bytes, ["topic", "partition"])
        .withColumn("recordsPerMinute", rate * 60_000)
        .withColumn("recordsPerHour", rate * 3_600_000)
        .drop("spanMs")
        .orderBy("topic", "partition")
    )


def compression_stats(records: DataFrame) -> DataFrame:
    """Per topic and codec: record payload bytes / stored batch bytes (above 1 means it compressed)."""
    batches = records.groupBy("topic", "partition", "batchBaseOffset", "compression").agg(
        F.first("batchSizeBytes").alias("batchBytes"), F.sum(payload_bytes()).alias("payloadBytes")
    )
    return (
        batches.groupBy("topic", "compression")
        .agg(F.count(F.lit(1)).alias("batches"), F.sum("payloadBytes").alias("payloadBytes"),
             F.sum("batchBytes").alias("logBytes"))
        .withColumn("compressionRatio", F.col("payloadBytes") / F.col("logBytes"))
        .orderBy("topic", "compression")
    )


def pick_bucket_seconds(span_ms: Optional[int]) -> int:
    """The finest bucket that keeps the chart under MAX_CHART_POINTS points."""
    for seconds in BUCKETS_SECONDS:
        if span_ms is None or span_ms / 1000 / seconds <= MAX_CHART_POINTS:
            return seconds
    return BUCKETS_SECONDS[-1]


def traffic(records: DataFrame, bucket_seconds: int) -> DataFrame:
    bucket = F.floor(F.unix_seconds("timestamp") / bucket_seconds) * bucket_seconds
    return (
        records.where(F.col("timestamp").isNotNull())
        .groupBy("topic", F.timestamp_seconds(bucket).alias("bucketStart"))
        .agg(F.count(F.lit(1)).alias("records"))
        .orderBy("bucketStart", "topic")
    )


def chart_figure(rows: list, title: str, metrics: tuple[str, ...] = ("records",)) -> Any:
    """One panel per metric, one line per topic (the busiest MAX_CHART_TOPICS), a legend entry for
    each line drawn (even for topics named with a leading underscore, which matplotlib would hide
    from an automatic legend) and whole-number ticks: the metrics are counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    totals: dict[str, int] = {}
    for row in rows:
        totals[row["topic"]] = totals.get(row["topic"], 0) + row[metrics[0]]
    shown = sorted(totals, key=totals.get, reverse=True)[:MAX_CHART_TOPICS]  # type: ignore[arg-type]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(11, 4 + 2 * len(metrics)), sharex=True, squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics):
        lines = []
        for topic in shown:
            points = sorted((r["bucketStart"], r[metric]) for r in rows if r["topic"] == topic)
            lines += ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", linewidth=1)
        ax.set_ylabel(metric)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if lines:
            ax.legend(lines, shown, fontsize="small")
    axes[0, 0].set_title(title)
    axes[-1, 0].set_xlabel("time (UTC)")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def save_chart(fig: Any, path: str) -> None:
    """Written to a temp file and renamed: a viewer refreshing the chart never sees half a PNG."""
    import matplotlib.pyplot as plt

    temp = f"{path}.tmp.png"
    fig.savefig(temp, dpi=100)
    plt.close(fig)
    os.replace(temp, path)


def draw_chart(traffic_rows: list, bucket_seconds: int, path: str) -> None:
    save_chart(chart_figure(traffic_rows, f"records per {bucket_seconds} s"), path)


def main(argv: Optional[list[str]] = None) -> int:
    parser = job_parser("Per topic/partition statistics of Kafka log segments")
    parser.add_argument("--output", required=True, help="output directory")
    args = parser.parse_args(argv)
    spark = job_session("kafka-log topic_stats", args)
    records = read_records(spark, args).select(
        "key", "value", "headers", "topic", "partition", "offset", "timestamp",
        "compression", "batchBaseOffset", "batchSizeBytes",
    ).persist()
    try:
        stats = partition_stats(records)
        stats.write.mode("overwrite").parquet(os.path.join(args.output, "partitions"))
        compression_stats(records).write.mode("overwrite").parquet(os.path.join(args.output, "compression"))
        bounds = records.agg(F.unix_millis(F.min("timestamp")), F.unix_millis(F.max("timestamp"))).first()
        span = None if bounds is None or bounds[0] is None else bounds[1] - bounds[0]
        bucket_seconds = pick_bucket_seconds(span)
        buckets = traffic(records, bucket_seconds)
        buckets.write.mode("overwrite").parquet(os.path.join(args.output, "traffic"))
        draw_chart(buckets.collect(), bucket_seconds, os.path.join(args.output, "traffic.png"))
        spark.read.parquet(os.path.join(args.output, "partitions")).orderBy("topic", "partition").show(
            200, truncate=False
        )
    finally:
        records.unpersist()
    return 0


if __name__ == "__main__":
    run_job(main)
