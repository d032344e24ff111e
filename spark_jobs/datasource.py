"""``spark.read.format("kafka-log").load(paths)``: Kafka segment files as a Spark DataFrame.

Built on Spark 4's Python data source API: the reader plans SegmentSplits on the driver
(planner) and each task reads its split into Arrow batches (segment_reader). Columns are
those of Spark's own Kafka source (key, value, topic, partition, offset, timestamp,
timestampType, headers) followed by batch-level ones (producerId, leaderEpoch, compression,
batchBaseOffset, batchSizeBytes). A record without a timestamp (magic 0) has a null
timestamp and timestampType -1. ``spark.readStream.format("kafka-log")`` is the streaming
reader of the same source (stream_source).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from spark_jobs.planner import SegmentSplit, plan
from spark_jobs.read_options import ReadOptions, parse_options
from spark_jobs.segment_reader import SPARK_SCHEMA, SplitReader
from spark_jobs.stream_source import KafkaLogStreamReader, parse_stream_options

FORMAT_NAME = "kafka-log"


class KafkaLogReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        splits = plan(self.options)
        # Spark needs at least one partition; an empty split of no file reads nothing.
        return splits or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, SegmentSplit):
            yield from SplitReader(partition, self.options).read()


class KafkaLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaLogReader(parse_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaLogStreamReader(parse_stream_options(self.options))


def register(spark: SparkSession) -> None:
    spark.dataSource.register(KafkaLogDataSource)
