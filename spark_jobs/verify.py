"""verify: CRC and index consistency of every segment, one Spark task per segment.

Prints each problem with its file and byte position (and writes them as Parquet with
--output); exits 1 when any segment has a problem, 0 when all are sound.

    python -m spark_jobs.verify --log-dirs DIR [DIR ...] [--topics T ...] [--output OUT]
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as `spark-submit spark_jobs/verify.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dataclasses import asdict
from typing import Optional

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.cli import job_parser, job_session, read_options, run_job
from spark_jobs.layout import SegmentFile, discover
from spark_jobs.read_options import ReadOptions
from spark_jobs.segment_check import SegmentReport, check_segment

REPORT_SCHEMA = "file string, position long, kind string, detail string"


def all_segments(options: ReadOptions) -> list[SegmentFile]:
    return [s for replica in discover(options.paths, options.wants_topic) for s in replica.segments]


def check_all(spark: SparkSession, segments: list[SegmentFile]) -> list[SegmentReport]:
    """Every segment checked in parallel; the reports come back in segment order."""
    if not segments:
        return []
    rdd = spark.sparkContext.parallelize(segments, len(segments))
    return rdd.map(check_segment).collect()


def problems_frame(spark: SparkSession, reports: list[SegmentReport]) -> DataFrame:
    rows = [asdict(p) for report in reports for p in report.problems]
    return spark.createDataFrame(rows, REPORT_SCHEMA)


def main(argv: Optional[list[str]] = None) -> int:
    parser = job_parser("Check CRCs and index consistency of Kafka log segments")
    parser.add_argument("--output", help="also write the problems as Parquet here")
    args = parser.parse_args(argv)
    spark = job_session("kafka-log verify", args)
    segments = all_segments(read_options(args))
    reports = check_all(spark, segments)
    problems = [p for report in reports for p in report.problems]
    for problem in problems:
        print(f"{problem.file}:{problem.position}: {problem.kind}: {problem.detail}")
    if args.output:
        problems_frame(spark, reports).write.mode("overwrite").parquet(args.output)
    entries = sum(r.entries for r in reports)
    records = sum(r.records for r in reports)
    print(f"checked {len(reports)} segments, {entries} entries, {records} records: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    run_job(main)
