"""The streaming source's offset bookkeeping, free of Spark and of files: pure functions on numbers.

Offsets are kept as Spark's Kafka source keeps them in its checkpoint: per topic, per partition
(a string key), the next offset to read: ``{"topic": {"0": 42}}``. Each micro-batch reads, per
partition, ``[start, end)`` where ``end`` is at most the partition's readable end (its high
watermark, and under read_committed its last stable offset). Data loss follows Spark's Kafka
source: offsets deleted (retention, DeleteRecords) before they were read, a partition that
vanished, a partition that appeared with its first offsets already gone, or a checkpointed offset
beyond the log end. Under ``failOnDataLoss=true`` (the default) the query fails naming the
partition and offsets; under ``false`` a warning is logged and the source skips ahead.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Optional

TopicPartition = tuple[str, int]
SparkOffsets = dict[str, dict[str, int]]
EARLIEST = -2
LATEST = -1

log = logging.getLogger("spark_jobs.stream")


class DataLossError(RuntimeError):
    """Offsets the query had not read yet are gone (or never existed) and failOnDataLoss is true."""


class OffsetsError(ValueError):
    """Offsets that cannot belong to this query: foreign topics, missing partitions, bad JSON."""


@dataclass(frozen=True)
class PartitionExtent:
    """What one partition holds right now: ``[log_start, readable_end)`` may be read, the log ends at log_end."""

    log_start: int
    readable_end: int
    log_end: int


@dataclass(frozen=True)
class OffsetRange:
    """One partition's share of a micro-batch."""

    topic: str
    partition: int
    start: int
    end: int


class DataLossPolicy:
    """failOnDataLoss: raise, or warn and let the caller skip."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def report(self, message: str) -> None:
        if self.fail:
            raise DataLossError(
                f"{message}. Some data may have been lost because it is no longer in the log (retention or "
                "DeleteRecords) or the log was replaced. If you want the query to go on anyway, set the source "
                "option failOnDataLoss to false."
            )
        log.warning("%s. Some data may have been lost; failOnDataLoss=false, so the query goes on.", message)


def to_spark(offsets: Mapping[TopicPartition, int]) -> SparkOffsets:
    spark: SparkOffsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        spark.setdefault(topic, {})[str(partition)] = int(offset)
    return spark


def from_spark(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    try:
        return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
    except (AttributeError, TypeError, ValueError):
        raise OffsetsError(f"offsets must look like {{\"topic\": {{\"0\": 42}}}}, not {offsets!r}") from None


def check_subscribed(offsets: Mapping[TopicPartition, int], wants_topic: Callable[[str], bool], what: str) -> None:
    """Offsets naming topics this query does not read come from another query (or a typo)."""
    foreign = sorted({t for t, _p in offsets if not wants_topic(t)})
    if foreign:
        raise OffsetsError(
            f"{what} names topics this query does not subscribe to: {', '.join(foreign)}; "
            "a checkpoint belongs to one query (use a new checkpointLocation for different topics)"
        )


def initial_offsets(
    extents: Mapping[TopicPartition, PartitionExtent],
    starting: str,
    specific: Optional[Mapping[TopicPartition, int]] = None,
    by_timestamp: Optional[Callable[[TopicPartition], Optional[int]]] = None,
    timestamp_strategy: str = "error",
) -> dict[TopicPartition, int]:
    """Where a new query starts: ``starting`` is earliest, latest or json (then ``specific``),
    or timestamp (then ``by_timestamp`` gives each partition's first offset at or after it)."""
    if starting == "earliest":
        return {tp: e.log_start for tp, e in extents.items()}
    if starting == "latest":
        return {tp: e.readable_end for tp, e in extents.items()}
    if starting == "timestamp":
        assert by_timestamp is not None
        chosen = {}
        for tp, extent in extents.items():
            found = by_timestamp(tp)
            if found is None:
                if timestamp_strategy != "latest":
                    raise OffsetsError(
                        f"{tp[0]}-{tp[1]} has no record at or after startingTimestamp (set "
                        "startingOffsetsByTimestampStrategy=latest to start such partitions at their end)"
                    )
                found = extent.readable_end
            chosen[tp] = min(found, extent.readable_end)
        return chosen
    assert specific is not None
    missing = sorted(set(extents) - set(specific))
    if missing:
        raise OffsetsError(
            "startingOffsets must name every partition of the subscribed topics; missing: "
            + ", ".join(f"{t}-{p}" for t, p in missing)
        )
    chosen = {}
    for tp, offset in specific.items():
        extent = extents.get(tp)
        if extent is None:
            raise OffsetsError(f"startingOffsets names {tp[0]}-{tp[1]}, which is not under the log dirs")
        chosen[tp] = extent.log_start if offset == EARLIEST else extent.readable_end if offset == LATEST else offset
    return chosen


def clamp_start(tp: TopicPartition, start: int, extent: PartitionExtent, policy: DataLossPolicy) -> int:
    """The first offset that can really be read from ``start``, reporting deleted or impossible offsets."""
    if start < extent.log_start:
        policy.report(
            f"{tp[0]}-{tp[1]}: offsets {start} to {extent.log_start - 1} were deleted before the query read them "
            f"(the log now starts at {extent.log_start})"
        )
        return extent.log_start
    if start > extent.log_end:
        policy.report(
            f"{tp[0]}-{tp[1]}: offset {start} is beyond the log end {extent.log_end} (the log was truncated "
            "or replaced)"
        )
        return extent.readable_end
    return start


def reconcile(
    start: Mapping[TopicPartition, int], extents: Mapping[TopicPartition, PartitionExtent], policy: DataLossPolicy
) -> dict[TopicPartition, int]:
    """Per partition present now, where reading goes on: vanished partitions are reported and dropped,
    new ones start at their log start (reported when that is not 0, as Spark's Kafka source does)."""
    for tp in sorted(set(start) - set(extents)):
        policy.report(f"{tp[0]}-{tp[1]} is gone from the log dirs, its offsets from {start[tp]} were never read")
    resumed = {}
    for tp, extent in extents.items():
        if tp in start:
            resumed[tp] = clamp_start(tp, start[tp], extent, policy)
        else:
            if extent.log_start != 0:
                policy.report(f"{tp[0]}-{tp[1]} appeared starting at offset {extent.log_start}, not 0")
            resumed[tp] = extent.log_start
    return resumed


def _prorated(begin: dict[TopicPartition, int], end: dict[TopicPartition, int], share: Callable[[TopicPartition], float]
              ) -> dict[TopicPartition, int]:
    """Spark's rate limit: each partition advances by its share, rounded down, but at least one offset."""
    limited = {}
    for tp, until in end.items():
        wanted = share(tp)
        step = math.ceil(wanted) if wanted < 1 else math.floor(wanted)
        limited[tp] = min(until, begin[tp] + step)
    return limited


def limit_offsets(begin: dict[TopicPartition, int], end: dict[TopicPartition, int], max_offsets: int
                  ) -> dict[TopicPartition, int]:
    sizes = {tp: end[tp] - begin[tp] for tp in end if end[tp] > begin[tp]}
    total = sum(sizes.values())
    if total <= max_offsets:
        return end
    return _prorated(begin, end, lambda tp: max_offsets * sizes.get(tp, 0) / total)


def limit_bytes(begin: dict[TopicPartition, int], end: dict[TopicPartition, int], max_bytes: int,
                byte_size: Callable[[TopicPartition, int, int], int]) -> dict[TopicPartition, int]:
    """Each partition keeps the same fraction (budget / bytes available) of its offsets."""
    sizes = {tp: byte_size(tp, begin[tp], end[tp]) for tp in end if end[tp] > begin[tp]}
    total = sum(sizes.values())
    if total <= max_bytes:
        return end
    fraction = max_bytes / total
    return _prorated(begin, end, lambda tp: (end[tp] - begin[tp]) * fraction if tp in sizes else 0)


def next_end(
    begin: dict[TopicPartition, int],
    extents: Mapping[TopicPartition, PartitionExtent],
    max_offsets: Optional[int] = None,
    max_bytes: Optional[int] = None,
    byte_size: Optional[Callable[[TopicPartition, int, int], int]] = None,
) -> dict[TopicPartition, int]:
    """The end of the next micro-batch from reconciled ``begin`` offsets, within the trigger's limits."""
    end = {tp: max(offset, extents[tp].readable_end) for tp, offset in begin.items()}
    if max_offsets is not None:
        end = limit_offsets(begin, end, max_offsets)
    if max_bytes is not None:
        assert byte_size is not None
        end = limit_bytes(begin, end, max_bytes, byte_size)
    return end


def ranges(begin: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """The non-empty per-partition ranges of a micro-batch."""
    return [OffsetRange(t, p, begin[(t, p)], until) for (t, p), until in sorted(end.items())
            if (t, p) in begin and until > begin[(t, p)]]
