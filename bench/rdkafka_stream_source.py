"""The librdkafka side of bench/spark_stream_bench.py: a Python streaming data source ``rdkafka``.

Offsets ``{"<partition>": next offset}`` planned from the broker's watermarks (through a
confluent-kafka consumer); each micro-batch range is read in a task by a consumer (assign, then
consume in batches of CONSUME_BATCH) into Arrow batches. A module of its own: Spark's Python
workers import it by name (a class of a ``__main__`` script is pickled by value, and the
consumer's C type cannot be).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

CONSUME_BATCH = 10_000
RDKAFKA_SCHEMA = "value binary, timestamp timestamp, partition int, offset long"


class RangeSplit(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))


class RdKafkaStreamReader(DataSourceStreamReader):
    """Offsets {"<partition>": next offset}; each micro-batch range read through one consumer per task."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, latest: bool) -> None:
        self.bootstrap, self.topic, self.partitions_count, self.latest = bootstrap, topic, partitions, latest

    def _watermarks(self, which: int) -> dict:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "stream-bench-planner"})
        try:
            return {str(p): consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[which]
                    for p in range(self.partitions_count)}
        finally:
            consumer.close()

    def initialOffset(self) -> dict:
        return self._watermarks(1 if self.latest else 0)

    def latestOffset(self) -> dict:
        return self._watermarks(1)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [RangeSplit(int(p), start.get(p, 0), until) for p, until in end.items() if until > start.get(p, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        number, start, end = partition.value
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "stream-bench-reader",
                             "enable.auto.commit": False, "fetch.max.bytes": 50 * 1024 * 1024})
        consumer.assign([TopicPartition(self.topic, number, start)])
        next_offset = start
        try:
            while next_offset < end:
                messages = [m for m in consumer.consume(CONSUME_BATCH, timeout=5) if m.error() is None]
                messages = [m for m in messages if m.offset() < end]
                if not messages:
                    continue
                next_offset = messages[-1].offset() + 1
                yield pa.RecordBatch.from_arrays(
                    [pa.array([m.value() for m in messages], pa.binary()),
                     pa.array([m.timestamp()[1] * 1000 for m in messages], pa.timestamp("us", tz="UTC")),
                     pa.array([number] * len(messages), pa.int32()),
                     pa.array([m.offset() for m in messages], pa.int64())],
                    names=["value", "timestamp", "partition", "offset"])
        finally:
            consumer.close()


class RdKafkaSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rdkafka"

    def schema(self) -> str:
        return RDKAFKA_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        options = self.options
        return RdKafkaStreamReader(options["bootstrap"], options["topic"], int(options["partitions"]),
                                   options.get("startingOffsets", "earliest") == "latest")
