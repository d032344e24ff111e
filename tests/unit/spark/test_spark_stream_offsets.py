"""The streaming source's offset logic without Spark: start, data loss, new partitions, trigger limits."""
from __future__ import annotations

import logging

import pytest

from spark_jobs.stream_offsets import (
    DataLossError,
    DataLossPolicy,
    OffsetRange,
    OffsetsError,
    PartitionExtent,
    check_subscribed,
    from_spark,
    initial_offsets,
    next_end,
    ranges,
    reconcile,
    to_spark,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)
EXTENTS = {A0: PartitionExtent(10, 50, 60), A1: PartitionExtent(0, 30, 30)}
FAIL, WARN = DataLossPolicy(True), DataLossPolicy(False)


def test_offsets_round_trip_in_sparks_checkpoint_form() -> None:
    spark = to_spark({A0: 42, A1: 7, B0: 0})
    assert spark == {"a": {"0": 42, "1": 7}, "b": {"0": 0}}
    assert from_spark(spark) == {A0: 42, A1: 7, B0: 0}
    with pytest.raises(OffsetsError, match="must look like"):
        from_spark({"a": 3})  # type: ignore[dict-item]


def test_starting_offsets() -> None:
    assert initial_offsets(EXTENTS, "earliest") == {A0: 10, A1: 0}
    assert initial_offsets(EXTENTS, "latest") == {A0: 50, A1: 30}
    assert initial_offsets(EXTENTS, "json", {A0: -2, A1: -1}) == {A0: 10, A1: 30}
    assert initial_offsets(EXTENTS, "json", {A0: 20, A1: 5}) == {A0: 20, A1: 5}
    with pytest.raises(OffsetsError, match="missing: a-1"):
        initial_offsets(EXTENTS, "json", {A0: 20})
    with pytest.raises(OffsetsError, match="names b-0"):
        initial_offsets(EXTENTS, "json", {A0: 20, A1: 5, B0: 1})


def test_starting_timestamp_and_its_strategy() -> None:
    found = {A0: 33, A1: None}
    with pytest.raises(OffsetsError, match="a-1 has no record at or after startingTimestamp"):
        initial_offsets(EXTENTS, "timestamp", by_timestamp=found.get)
    assert initial_offsets(EXTENTS, "timestamp", by_timestamp=found.get, timestamp_strategy="latest") == {
        A0: 33, A1: 30}


def test_checkpoint_of_another_querys_topics_is_refused() -> None:
    with pytest.raises(OffsetsError, match="does not subscribe to: b"):
        check_subscribed({A0: 1, B0: 2}, lambda t: t == "a", "the checkpoint's offsets")


def test_deleted_offsets_fail_or_skip(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(DataLossError, match=r"a-0: offsets 3 to 9 were deleted .*failOnDataLoss to false"):
        reconcile({A0: 3, A1: 0}, EXTENTS, FAIL)
    with caplog.at_level(logging.WARNING, "spark_jobs.stream"):
        assert reconcile({A0: 3, A1: 0}, EXTENTS, WARN) == {A0: 10, A1: 0}
    assert "offsets 3 to 9 were deleted" in caplog.text


def test_offset_beyond_the_log_end() -> None:
    with pytest.raises(DataLossError, match="a-1: offset 31 is beyond the log end 30"):
        reconcile({A0: 10, A1: 31}, EXTENTS, FAIL)
    assert reconcile({A0: 10, A1: 31}, EXTENTS, WARN) == {A0: 10, A1: 30}
    # between the readable end and the log end is only "nothing new yet"
    assert reconcile({A0: 55, A1: 30}, EXTENTS, FAIL) == {A0: 55, A1: 30}


def test_new_and_vanished_partitions() -> None:
    grown = {**EXTENTS, B0: PartitionExtent(0, 4, 4)}
    assert reconcile({A0: 10, A1: 0}, grown, FAIL) == {A0: 10, A1: 0, B0: 0}
    late = {**EXTENTS, B0: PartitionExtent(5, 9, 9)}
    with pytest.raises(DataLossError, match="b-0 appeared starting at offset 5, not 0"):
        reconcile({A0: 10, A1: 0}, late, FAIL)
    with pytest.raises(DataLossError, match="b-0 is gone"):
        reconcile({A0: 10, A1: 0, B0: 3}, EXTENTS, FAIL)
    assert reconcile({A0: 10, A1: 0, B0: 3}, EXTENTS, WARN) == {A0: 10, A1: 0}


def test_end_is_the_readable_end_and_never_goes_back() -> None:
    assert next_end({A0: 10, A1: 0}, EXTENTS) == {A0: 50, A1: 30}
    assert next_end({A0: 55, A1: 30}, EXTENTS) == {A0: 55, A1: 30}


def test_max_offsets_per_trigger_is_prorated_as_spark_does() -> None:
    # 40 and 30 offsets available, 7 allowed: 4 and 3
    assert next_end({A0: 10, A1: 0}, EXTENTS, max_offsets=7) == {A0: 14, A1: 3}
    # shares of 1.95 and 0.05 offsets: rounded down, but the one under an offset still moves by one
    assert next_end({A0: 10, A1: 29}, EXTENTS, max_offsets=2) == {A0: 11, A1: 30}


def test_max_bytes_per_trigger_keeps_each_partitions_fraction() -> None:
    sizes = {A0: 4000, A1: 6000}  # bytes between begin and end
    end = next_end({A0: 10, A1: 0}, EXTENTS, max_bytes=1000, byte_size=lambda tp, a, b: sizes[tp])
    assert end == {A0: 14, A1: 3}  # a tenth of each partition's offsets
    assert next_end({A0: 10, A1: 0}, EXTENTS, max_bytes=10_000, byte_size=lambda tp, a, b: sizes[tp]) == {
        A0: 50, A1: 30}


def test_ranges_skip_empty_partitions() -> None:
    assert ranges({A0: 10, A1: 30}, {A0: 20, A1: 30}) == [OffsetRange("a", 0, 10, 20)]
