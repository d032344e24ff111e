"""Reading a kafka-log source without Spark (plan + SplitReader), and comparing rows to Expected."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spark_jobs.planner import SegmentSplit, plan
from spark_jobs.read_options import parse_options
from spark_jobs.segment_reader import SplitReader
from tests.unit.spark.segment_files import Expected


def read_direct(options: Mapping[str, str]) -> tuple[list[SegmentSplit], list[dict[str, Any]]]:
    parsed = parse_options(options)
    splits = plan(parsed)
    rows = [row for split in splits for batch in SplitReader(split, parsed).read() for row in batch.to_pylist()]
    return splits, rows


def row_view(row: Mapping[str, Any]) -> tuple:
    """A row as comparable plain values (timestamp in ms, headers as tuples)."""
    ts = row["timestamp"]
    millis = None if ts is None else round(ts.timestamp() * 1000)
    headers = tuple((h["key"], h["value"]) for h in row["headers"] or ())
    return (row["topic"], row["partition"], row["offset"], row["key"], row["value"], millis, row["timestampType"],
            headers, row["compression"])


def expected_view(expected: Iterable[Expected]) -> list[tuple]:
    return sorted(
        (e.topic, e.partition, e.offset, e.key, e.value, e.timestamp, e.timestamp_type, e.headers, e.compression)
        for e in expected
    )
