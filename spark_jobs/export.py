"""export: segments to a Parquet dataset partitioned by topic and date (UTC, from the timestamp).

The command line is fixed because other tools call it:

    python -m spark_jobs.export --log-dirs DIR [DIR ...] --output OUT [--topics T ...]

The dataset under OUT has the columns key, value, topic, partition, offset, timestamp,
timestampType, headers with the types of Spark's Kafka source (``topic`` and ``date`` are the
Hive-style directory levels ``topic=<t>/date=<yyyy-MM-dd>``). ``--decode utf8`` adds
``valueString``; ``--decode json`` adds ``valueJson``, a struct whose schema is inferred from a
sample of the values.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as `spark-submit spark_jobs/export.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.cli import job_parser, job_session, read_records, run_job

EXPORT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
JSON_SAMPLE_ROWS = 1000
DECODINGS = ("none", "utf8", "json")


def with_decoded_values(spark: SparkSession, records: DataFrame, decode: str) -> DataFrame:
    if decode == "none":
        return records
    text = F.col("value").cast("string")
    if decode == "utf8":
        return records.withColumn("valueString", text)
    sample = records.where(F.col("value").isNotNull()).select(text.alias("v")).limit(JSON_SAMPLE_ROWS)
    schema = spark.read.json(sample.rdd.map(lambda row: row.v)).schema
    if not schema.fields:
        return records.withColumn("valueJson", F.lit(None).cast("string"))
    return records.withColumn("valueJson", F.from_json(text, schema))


def export_frame(spark: SparkSession, records: DataFrame, decode: str = "none") -> DataFrame:
    selected = records.select(*EXPORT_COLUMNS).withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))
    return with_decoded_values(spark, selected, decode)


def main(argv: Optional[list[str]] = None) -> int:
    parser = job_parser("Export Kafka log segments to Parquet partitioned by topic and date")
    parser.add_argument("--output", required=True, help="output directory (the Parquet dataset)")
    parser.add_argument("--decode", choices=DECODINGS, default="none", help="add a decoded value column")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    spark = job_session("kafka-log export", args)
    frame = export_frame(spark, read_records(spark, args), args.decode)
    (
        frame.write.mode("overwrite" if args.overwrite else "errorifexists")
        .partitionBy("topic", "date")
        .parquet(args.output)
    )
    print(f"exported to {args.output}")
    return 0


if __name__ == "__main__":
    run_job(main)
