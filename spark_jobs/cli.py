"""Command-line plumbing the jobs share: the log-dir/topic/master arguments, the source read (batch or stream)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import NoReturn, Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from spark_jobs.datasource import FORMAT_NAME
from spark_jobs.read_options import READ_COMMITTED, READ_UNCOMMITTED, ReadOptions, parse_options
from spark_jobs.session import create_session


def job_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--log-dirs", nargs="+", required=True, metavar="DIR",
                        help="broker log dirs, partition dirs or single .log segments")
    parser.add_argument("--topics", nargs="*", metavar="T", help="only these topics (default: all)")
    parser.add_argument("--master", default=None, help="Spark master (default local[*], or spark-submit's)")
    parser.add_argument("--isolation-level", choices=(READ_UNCOMMITTED, READ_COMMITTED), default=READ_UNCOMMITTED)
    parser.add_argument("--committed-only", action="store_true",
                        help="stop at each partition's high watermark (replication-offset-checkpoint)")
    parser.add_argument("--skip-corrupt", action="store_true", help="skip corrupt entries instead of failing")
    parser.add_argument("--max-split-bytes", type=int, default=None, help="bytes per read task (default 128 MiB)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark config")
    parser.add_argument("--no-progress", action="store_true", help="hide Spark's console progress bar")
    return parser


def source_options(args: argparse.Namespace, topics: Optional[list[str]] = None) -> dict[str, str]:
    options = {
        "paths": json.dumps(list(args.log_dirs)),
        "isolation.level": args.isolation_level,
        "committedOnly": str(args.committed_only).lower(),
        "skipCorrupt": str(args.skip_corrupt).lower(),
    }
    wanted = topics if topics is not None else args.topics
    if wanted:
        options["topics"] = ",".join(wanted)
    if args.max_split_bytes:
        options["maxSplitBytes"] = str(args.max_split_bytes)
    return options


def read_options(args: argparse.Namespace, topics: Optional[list[str]] = None) -> ReadOptions:
    return parse_options(source_options(args, topics))


def read_records(spark: SparkSession, args: argparse.Namespace, topics: Optional[list[str]] = None) -> DataFrame:
    options = source_options(args, topics)
    paths = json.loads(options.pop("paths"))
    return spark.read.format(FORMAT_NAME).options(**options).load(paths)


def stream_parser(description: str) -> argparse.ArgumentParser:
    """The batch jobs' arguments, and those of a streaming query (checkpoint, trigger, start, limits)."""
    parser = job_parser(description)
    parser.add_argument("--topic-pattern", default=None, help="subscribe to topics matching this regex")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpointLocation")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval")
    parser.add_argument("--available-now", action="store_true", help="read what is there now, then stop")
    parser.add_argument("--starting-offsets", default="latest", help="earliest, latest or Spark's JSON offsets")
    parser.add_argument("--starting-timestamp", type=int, default=None, help="start at this time (epoch ms)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--max-bytes-per-trigger", type=int, default=None)
    parser.add_argument("--fail-on-data-loss", choices=("true", "false"), default="true")
    return parser


def read_stream(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    options = source_options(args)  # the paths go as the "paths" option: readStream.load takes one path
    del options["committedOnly"]  # a stream always stops at the high watermark
    options.update(startingOffsets=args.starting_offsets, failOnDataLoss=args.fail_on_data_loss)
    for name, value in (("topicPattern", args.topic_pattern), ("startingTimestamp", args.starting_timestamp),
                        ("maxOffsetsPerTrigger", args.max_offsets_per_trigger),
                        ("maxBytesPerTrigger", args.max_bytes_per_trigger)):
        if value is not None:
            options[name] = str(value)
    return spark.readStream.format(FORMAT_NAME).options(**options).load()


def start_query(writer: DataStreamWriter, args: argparse.Namespace) -> StreamingQuery:
    writer = writer.option("checkpointLocation", args.checkpoint)
    if args.available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{args.trigger_seconds} seconds").start()


def _conf(pairs: list[str]) -> Mapping[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--conf expects KEY=VALUE, got {pair!r}")
        conf[key] = value
    return conf


def job_session(app_name: str, args: argparse.Namespace) -> SparkSession:
    spark = create_session(app_name, args.master, _conf(args.conf), progress=not args.no_progress)
    spark.sparkContext.setLogLevel("WARN")  # INFO lines would bury the progress bar
    return spark


def run_job(main: Callable[[], int]) -> NoReturn:
    """Entry point of ``python -m``/``spark-submit``: run, stop the session, exit with main's code."""
    try:
        code = main()
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    sys.exit(code)
