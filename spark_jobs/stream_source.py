"""``spark.readStream.format("kafka-log")``: the broker's log dirs as a Structured Streaming source.

Spark 4's Python streaming data source API: on the driver (a Python process Spark keeps for the
query) the reader turns the log dirs into offsets, Spark writes them to the query's offset log
in the checkpoint before a micro-batch runs, and the executors read each partition's
``[start, end)`` range straight from the segments. Offsets have the form Spark's Kafka source
checkpoints; the schema and columns are the batch reader's. See docs/spark-streaming.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_jobs.layout import discover
from spark_jobs.planner import plan_partition
from spark_jobs.read_options import READ_COMMITTED, OptionError, ReadOptions, bool_option, int_option, parse_options
from spark_jobs.segment_reader import CorruptSegmentError, SplitReader
from spark_jobs.stream_log import (
    LOG_START_OFFSET_CHECKPOINT,
    TailScanner,
    byte_position,
    log_start,
    offset_for_timestamp,
    read_checkpoint,
    require_broker_log_dirs,
    snapshot,
)
from spark_jobs.stream_offsets import (
    DataLossPolicy,
    TopicPartition,
    check_subscribed,
    from_spark,
    initial_offsets,
    next_end,
    ranges,
    reconcile,
    to_spark,
)

log = logging.getLogger("spark_jobs.stream")

# A micro-batch range is re-planned this many times when segments change under it (deleted,
# compacted and swapped) before the change is treated as an error.
MAX_REPLANS = 5
STARTING_KINDS = ("earliest", "latest")


@dataclass(frozen=True)
class StreamOptions:
    read: ReadOptions
    starting: str  # earliest, latest, json or timestamp
    specific_offsets: Optional[dict[TopicPartition, int]]
    max_offsets_per_trigger: Optional[int]
    max_bytes_per_trigger: Optional[int]
    fail_on_data_loss: bool
    timestamp_strategy: str

    @property
    def executor_options(self) -> ReadOptions:
        """What every range read uses: its bounds are offsets, never timestamps or option offsets."""
        return dataclasses.replace(self.read, starting_offset=None, starting_offsets=None, ending_offset=None,
                                   ending_offsets=None, starting_timestamp=None, ending_timestamp=None,
                                   committed_only=False)


def _positive(options: Mapping[str, str], name: str) -> Optional[int]:
    value = int_option(options, name)
    if value is not None and value <= 0:
        raise OptionError(f"option {name} must be positive, not {value}")
    return value


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    lowered = {k.lower(): v for k, v in options.items()}
    for unsupported in ("endingoffsets", "endingtimestamp"):
        if unsupported in lowered:
            raise OptionError(f"option {unsupported} is for batch reads; a stream reads up to the high watermark")
    read = parse_options(lowered)
    raw = lowered.get("startingoffsets", "latest").strip()
    specific = None
    if read.starting_timestamp is not None:
        starting = "timestamp"
    elif raw in STARTING_KINDS:
        starting = raw
    elif raw.startswith("{"):
        starting, specific = "json", from_spark(json.loads(raw))
        check_subscribed(specific, read.wants_topic, "startingOffsets")
    else:
        raise OptionError(f"startingOffsets must be earliest, latest or JSON like {{\"topic\": {{\"0\": 23}}}}, "
                          f"not {raw!r}")
    strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    require_broker_log_dirs(read.paths)
    return StreamOptions(read, starting, specific, _positive(lowered, "maxoffsetspertrigger"),
                         _positive(lowered, "maxbytespertrigger"), bool_option(lowered, "failondataloss", True),
                         strategy)


@dataclass
class OffsetRangeSplit(InputPartition):
    """One partition's range of one micro-batch, read by one task from the partition's directory."""

    topic: str
    partition: int
    directory: str
    start: int
    end: int

    def __post_init__(self) -> None:
        self.value = f"{self.topic}-{self.partition}[{self.start}:{self.end})"


def _last_offset(batch: pa.RecordBatch) -> int:
    return int(batch.column("offset")[-1].as_py())


def read_range(split: OffsetRangeSplit, options: ReadOptions, policy: DataLossPolicy) -> Iterator[pa.RecordBatch]:
    """Records of ``[start, end)`` as the segments hold them now; segments deleted or swapped while
    the range is read are looked up again, from the first offset not yet returned."""
    tp = (split.topic, split.partition)
    next_offset = split.start
    for _attempt in range(MAX_REPLANS):
        found = discover([split.directory])
        if not found:
            policy.report(f"{split.topic}-{split.partition}: {split.directory} is gone, offsets from "
                          f"{next_offset} to {split.end - 1} were never read")
            return
        replica = found[0]
        first = log_start(replica, read_checkpoint(replica.log_dir, LOG_START_OFFSET_CHECKPOINT).get(tp))
        if first > next_offset:
            policy.report(f"{split.topic}-{split.partition}: offsets {next_offset} to {min(first, split.end) - 1} "
                          "were deleted before this micro-batch read them")
            next_offset = first
        if next_offset >= split.end:
            return
        try:
            for segment_split in plan_partition(replica, options, (next_offset, split.end)):
                for batch in SplitReader(segment_split, options).read():
                    yield batch
                    next_offset = _last_offset(batch) + 1
            return
        except FileNotFoundError:
            continue  # deleted (renamed to .deleted) since it was listed: list again
        except CorruptSegmentError as exc:
            if _segments_unchanged(replica):
                raise
            log.info("kafka-log: %s changed while it was read (%s); reading it again", split.directory, exc.path)
    raise RuntimeError(f"{split.value}: the segments kept changing while the range was read")


def _segments_unchanged(replica) -> bool:
    now = discover([replica.directory])
    return bool(now) and [(s.path, s.size) for s in now[0].segments[:-1]] == [
        (s.path, s.size) for s in replica.segments[:-1]]


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self.policy = DataLossPolicy(options.fail_on_data_loss)
        self._scanner = TailScanner(options.read.isolation_level == READ_COMMITTED)
        self._target: Optional[dict[TopicPartition, int]] = None  # Trigger.AvailableNow's end

    def __getstate__(self) -> dict:
        # Executors need the options only, not the driver's scan state.
        state = dict(self.__dict__)
        state["_scanner"] = TailScanner(state["_scanner"].track_transactions)
        return state

    def _snapshot(self):
        opts = self.options.read
        return snapshot(opts.paths, opts.wants_topic, self._scanner, opts.isolation_level == READ_COMMITTED)

    def initialOffset(self) -> dict:
        now = self._snapshot()
        lookup = None
        if self.options.starting == "timestamp":
            timestamp = self.options.read.starting_timestamp
            assert timestamp is not None

            def lookup(tp: TopicPartition) -> Optional[int]:
                return offset_for_timestamp(now.replicas[tp], timestamp, now.extents[tp].readable_end)

        return to_spark(initial_offsets(now.extents, self.options.starting, self.options.specific_offsets, lookup,
                                        self.options.timestamp_strategy))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def _begin(self, start: dict, now) -> dict[TopicPartition, int]:
        offsets = from_spark(start)
        check_subscribed(offsets, self.options.read.wants_topic, "the checkpoint's offsets")
        return reconcile(offsets, now.extents, self.policy)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        now = self._snapshot()
        begin = self._begin(start, now)
        limited = not isinstance(limit, ReadAllAvailable)
        extents = now.extents
        if self._target is not None:
            extents = {tp: dataclasses.replace(e, readable_end=min(e.readable_end, self._target.get(tp, e.log_start)))
                       for tp, e in extents.items()}

        def byte_size(tp: TopicPartition, first: int, until: int) -> int:
            replica = now.replicas[tp]
            return max(1, byte_position(replica, until) - byte_position(replica, first))

        end = next_end(begin, extents,
                       self.options.max_offsets_per_trigger if limited else None,
                       self.options.max_bytes_per_trigger if limited else None, byte_size)
        return to_spark(end)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: e.readable_end for tp, e in self._snapshot().extents.items()}

    def reportLatestOffset(self) -> Optional[dict]:
        return to_spark({tp: e.readable_end for tp, e in self._snapshot().extents.items()})

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        now = self._snapshot()
        begin = self._begin(start, now)
        return [OffsetRangeSplit(r.topic, r.partition, now.replicas[(r.topic, r.partition)].directory, r.start, r.end)
                for r in ranges(begin, from_spark(end)) if (r.topic, r.partition) in now.replicas]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRangeSplit)
        yield from read_range(partition, self.options.executor_options, self.policy)

