"""consumer_offsets: the history of committed offsets from __consumer_offsets segments, and lag.

Writes under --output: ``history/`` (every offset commit and offset deletion, in log order per
group/topic/partition), ``groups/`` (every group metadata record: generation, protocol, leader,
member count, or deletion) and ``lag/`` (per group/topic/partition the latest commit against
the partition's log end offset, when that partition's log is among the inputs).

Offsets a transactional producer committed (TxnOffsetCommit, ``send_offsets_to_transaction``) carry
that producer's id in ``producerId`` (-1 for the group coordinator's own commits). The job reads
read_committed by default, as the group coordinator does: the commits of aborted transactions, and
of transactions still open, are not offsets the group has; ``--isolation-level read_uncommitted``
shows every attempt.

    python -m spark_jobs.consumer_offsets --log-dirs DIR [DIR ...] --output OUT
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as `spark-submit spark_jobs/consumer_offsets.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from collections.abc import Iterator
from typing import Any, Optional

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from protocol.exceptions import ProtocolError
from spark_jobs.cli import job_parser, job_session, read_options, read_records, run_job
from protocol.consumer_offsets_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    is_classic_group_key,
)
from spark_jobs.planner import partition_end_offsets
from spark_jobs.read_options import READ_COMMITTED

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"

DECODED_FIELDS: list[tuple[str, pa.DataType]] = [
    ("kind", pa.string()),
    ("group", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("committedOffset", pa.int64()),
    ("leaderEpoch", pa.int32()),
    ("metadata", pa.string()),
    ("commitTimestamp", pa.int64()),
    ("expireTimestamp", pa.int64()),
    ("protocolType", pa.string()),
    ("generation", pa.int32()),
    ("protocol", pa.string()),
    ("leader", pa.string()),
    ("members", pa.int32()),
    ("deleted", pa.bool_()),
    ("producerId", pa.int64()),
    ("coordinatorPartition", pa.int32()),
    ("recordOffset", pa.int64()),
    ("recordTimestamp", pa.timestamp("us", tz="UTC")),
]
DECODED_ARROW = pa.schema(DECODED_FIELDS)
DECODED_SCHEMA = (
    "kind string, group string, topic string, partition int, committedOffset long, leaderEpoch int, "
    "metadata string, commitTimestamp long, expireTimestamp long, protocolType string, generation int, "
    "protocol string, leader string, members int, deleted boolean, producerId long, coordinatorPartition int, "
    "recordOffset long, recordTimestamp timestamp"
)


def decode_record(key: Optional[bytes], value: Optional[bytes]) -> dict[str, Any]:
    """The fields of one __consumer_offsets record; keys this code does not know give kind None."""
    if key is None or not is_classic_group_key(key):
        return {"kind": None}  # e.g. KIP-848 consumer-group records, not classic offsets
    decoded_key = decode_key(key)
    if isinstance(decoded_key, OffsetCommitKey):
        row: dict[str, Any] = {"kind": OFFSET_COMMIT, "group": decoded_key.group, "topic": decoded_key.topic,
                               "partition": decoded_key.partition, "deleted": value is None}
        if value is not None:
            commit = decode_offset_commit_value(value)
            row.update(committedOffset=commit.offset, leaderEpoch=commit.leader_epoch, metadata=commit.metadata,
                       commitTimestamp=commit.commit_timestamp, expireTimestamp=commit.expire_timestamp)
        return row
    assert isinstance(decoded_key, GroupMetadataKey)
    row = {"kind": GROUP_METADATA, "group": decoded_key.group, "deleted": value is None}
    if value is not None:
        group = decode_group_metadata_value(value)
        row.update(protocolType=group.protocol_type, generation=group.generation, protocol=group.protocol,
                   leader=group.leader, members=len(group.members))
    return row


def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: key/value/producerId/partition/offset/timestamp in, one decoded row per known record out."""
    for batch in batches:
        data = batch.to_pydict()
        rows = []
        for key, value, producer_id, partition, offset, timestamp in zip(
            data["key"], data["value"], data["producerId"], data["partition"], data["offset"], data["timestamp"]
        ):
            try:
                row = decode_record(key, value)
            except ProtocolError as exc:
                raise ProtocolError(f"__consumer_offsets-{partition} offset {offset}: {exc}") from exc
            if row["kind"] is not None:
                row.update(producerId=producer_id, coordinatorPartition=partition, recordOffset=offset,
                           recordTimestamp=timestamp)
                rows.append(row)
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=DECODED_ARROW)


def decoded_records(records: DataFrame) -> DataFrame:
    return records.select("key", "value", "producerId", "partition", "offset", "timestamp").mapInArrow(
        decode_batches, DECODED_SCHEMA
    )


def commit_history(decoded: DataFrame) -> DataFrame:
    return (
        decoded.where(F.col("kind") == OFFSET_COMMIT)
        .select("group", "topic", "partition", "committedOffset", "leaderEpoch", "metadata", "commitTimestamp",
                "expireTimestamp", "deleted", "producerId", "coordinatorPartition", "recordOffset", "recordTimestamp")
        .orderBy("group", "topic", "partition", "coordinatorPartition", "recordOffset")
    )


def group_history(decoded: DataFrame) -> DataFrame:
    return (
        decoded.where(F.col("kind") == GROUP_METADATA)
        .select("group", "protocolType", "generation", "protocol", "leader", "members", "deleted",
                "coordinatorPartition", "recordOffset", "recordTimestamp")
        .orderBy("group", "coordinatorPartition", "recordOffset")
    )


def latest_commits(history: DataFrame) -> DataFrame:
    """The last record per group/topic/partition, dropped when it deleted the offset."""
    last = Window.partitionBy("group", "topic", "partition").orderBy(
        F.col("coordinatorPartition").desc(), F.col("recordOffset").desc()
    )
    return (
        history.withColumn("rank", F.row_number().over(last))
        .where((F.col("rank") == 1) & ~F.col("deleted"))
        .drop("rank", "deleted")
    )


def lag(spark: SparkSession, history: DataFrame, end_offsets: dict[tuple[str, int], int]) -> DataFrame:
    ends = spark.createDataFrame(
        [(t, p, o) for (t, p), o in end_offsets.items()], "topic string, partition int, logEndOffset long"
    )
    return (
        latest_commits(history)
        .join(ends, ["topic", "partition"], "left")
        .withColumn("lag", F.col("logEndOffset") - F.col("committedOffset"))
        .select("group", "topic", "partition", "committedOffset", "logEndOffset", "lag", "commitTimestamp")
        .orderBy("group", "topic", "partition")
    )


def main(argv: Optional[list[str]] = None) -> int:
    parser = job_parser("Committed offsets history and lag from __consumer_offsets segments")
    parser.add_argument("--output", required=True, help="output directory")
    parser.set_defaults(isolation_level=READ_COMMITTED)  # the offsets the group coordinator materialises
    args = parser.parse_args(argv)
    spark = job_session("kafka-log consumer_offsets", args)
    decoded = decoded_records(read_records(spark, args, [CONSUMER_OFFSETS_TOPIC])).persist()
    try:
        history = commit_history(decoded)
        history.write.mode("overwrite").parquet(os.path.join(args.output, "history"))
        group_history(decoded).write.mode("overwrite").parquet(os.path.join(args.output, "groups"))
        end_offsets = partition_end_offsets(read_options(args, args.topics or None))
        lags = lag(spark, spark.read.parquet(os.path.join(args.output, "history")), end_offsets)
        lags.write.mode("overwrite").parquet(os.path.join(args.output, "lag"))
        spark.read.parquet(os.path.join(args.output, "lag")).orderBy("group", "topic", "partition").show(
            200, truncate=False
        )
    finally:
        decoded.unpersist()
    return 0


if __name__ == "__main__":
    run_job(main)
