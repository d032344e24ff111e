"""Command-line plumbing the jobs share: the log-dir/topic/master arguments and the source read."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import NoReturn, Optional

from pyspark.sql import DataFrame, SparkSession

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
