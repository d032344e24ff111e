"""topic_stats_stream: per minute and topic, how many records and bytes arrived, as the log grows.

Each micro-batch counts its records per topic and minute (of the record timestamp) and writes
the partial counts to ``OUT/minutes/batchId=<n>/`` (Parquet, replaced if Spark replays the batch
after a restart, so each batch counts once), then sums all of them into ``OUT/per_minute/``
and redraws ``OUT/traffic.png`` (records and bytes per minute, one line per topic). ``bytes`` is
the record payload (key, value, headers).

    python -m spark_jobs.topic_stats_stream --log-dirs DIR [DIR ...] --output OUT --checkpoint CKPT
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as `spark-submit spark_jobs/topic_stats_stream.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.cli import job_session, read_stream, run_job, start_query, stream_parser
from spark_jobs.topic_stats import chart_figure, payload_bytes, save_chart

MINUTE_COLUMNS = ("topic", "bucketStart", "records", "bytes")


def minute_counts(records: DataFrame) -> DataFrame:
    """One micro-batch's records and payload bytes per topic and minute."""
    return (
        records.where(F.col("timestamp").isNotNull())
        .groupBy("topic", F.date_trunc("minute", "timestamp").alias("bucketStart"))
        .agg(F.count(F.lit(1)).alias("records"), F.sum(payload_bytes()).alias("bytes"))
    )


class MinuteSink:
    """foreachBatch target: the batch's counts, then the totals and the chart refreshed."""

    def __init__(self, output: str) -> None:
        self.output = output

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        minutes_dir = os.path.join(self.output, "minutes")
        minute_counts(batch).write.mode("overwrite").parquet(os.path.join(minutes_dir, f"batchId={batch_id}"))
        spark = batch.sparkSession
        totals = (spark.read.parquet(minutes_dir).groupBy("topic", "bucketStart")
                  .agg(*(F.sum(c).alias(c) for c in MINUTE_COLUMNS[2:])).orderBy("bucketStart", "topic"))
        totals.write.mode("overwrite").parquet(os.path.join(self.output, "per_minute"))
        rows = spark.read.parquet(os.path.join(self.output, "per_minute")).collect()
        save_chart(chart_figure(rows, "per minute", ("records", "bytes")), os.path.join(self.output, "traffic.png"))


def main(argv: Optional[list[str]] = None) -> int:
    parser = stream_parser("Records and bytes per minute and topic, updated as the log grows")
    parser.add_argument("--output", required=True, help="output directory")
    args = parser.parse_args(argv)
    spark = job_session("kafka-log topic_stats_stream", args)
    records = read_stream(spark, args).select(
        "key", "value", "headers", "topic", "timestamp")
    query = start_query(records.writeStream.foreachBatch(MinuteSink(args.output)), args)
    print(f"counting into {args.output} (checkpoint {args.checkpoint})", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    run_job(main)
