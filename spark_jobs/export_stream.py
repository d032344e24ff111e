"""export_stream: a streaming query that appends the log's records to a Parquet dataset, exactly once.

Spark's file sink with the query's checkpoint: a micro-batch's files count once its entry is in
``OUT/_spark_metadata`` (read the dataset with Spark, which follows that log), so a driver killed
at any point and restarted with the same ``--checkpoint`` neither loses nor repeats a record.

    python -m spark_jobs.export_stream --log-dirs DIR [DIR ...] --output OUT --checkpoint CKPT \\
        [--topics T ... | --topic-pattern RE] [--trigger-seconds S | --available-now]
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as `spark-submit spark_jobs/export_stream.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from typing import Optional

from spark_jobs.cli import job_session, read_stream, run_job, start_query, stream_parser
from spark_jobs.export import EXPORT_COLUMNS

STREAM_COLUMNS = (*EXPORT_COLUMNS, "producerId", "batchBaseOffset")


def main(argv: Optional[list[str]] = None) -> int:
    parser = stream_parser("Append Kafka log records to a Parquet dataset as they are committed")
    parser.add_argument("--output", required=True, help="the Parquet dataset (file sink)")
    args = parser.parse_args(argv)
    spark = job_session("kafka-log export_stream", args)
    records = read_stream(spark, args).select(*STREAM_COLUMNS)
    query = start_query(records.writeStream.format("parquet").option("path", args.output), args)
    print(f"streaming to {args.output} (checkpoint {args.checkpoint})", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    run_job(main)
