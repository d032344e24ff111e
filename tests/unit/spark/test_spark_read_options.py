"""kafka-log options: parsing, offset specs, and the errors bad values give."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.consumer_offsets import decode_record
from protocol.consumer_offsets_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_offset_commit_value
from spark_jobs.read_options import OptionError, parse_options
from tests.unit.spark.spark_read_helpers import read_direct


def test_offsets_as_number_or_spark_json() -> None:
    options = parse_options({"path": "/x", "startingOffsets": "5", "endingOffsets": json.dumps({"t": {"1": 9, "2": -1}})})
    assert options.offset_bounds("t", 1) == (5, 9)
    assert options.offset_bounds("t", 2) == (5, None)
    assert options.offset_bounds("u", 0) == (5, None)
    assert parse_options({"path": "/x", "startingOffsets": "earliest"}).offset_bounds("t", 0) == (None, None)


@pytest.mark.parametrize("options, message", [
    ({}, "at least one path"),
    ({"path": "/x", "isolation.level": "serializable"}, "isolation.level"),
    ({"path": "/x", "startingOffsets": "soon"}, "startingoffsets must be an integer"),
    ({"path": "/x", "endingOffsets": "{bad json"}, "endingoffsets must be an offset or JSON"),
    ({"path": "/x", "committedOnly": "yes"}, "committedonly must be true or false"),
    ({"path": "/x", "maxSplitBytes": "-1"}, "maxSplitBytes must be positive"),
])
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_options(options)


def test_topics_and_case_insensitive_names() -> None:
    options = parse_options({"PATH": "/x", "Topics": "a, b", "ISOLATION.LEVEL": "read_committed"})
    assert options.topics == ("a", "b") and options.isolation_level == "read_committed"
    assert options.wants_topic("a") and not options.wants_topic("c")


def test_golden_committed_only_uses_replication_checkpoint(golden: Path) -> None:
    _s, rows = read_direct({"path": str(golden / "lj-invoice-3seg"), "committedOnly": "true",
                            "isolation.level": "read_committed"})
    assert len(rows) == 99523 and max(r["offset"] for r in rows) == 99522


def test_decode_record_kinds() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 1))
    row = decode_record(key, encode_offset_commit_value(OffsetCommitValue(12, "meta", 99, leader_epoch=3)))
    assert (row["kind"], row["group"], row["committedOffset"], row["leaderEpoch"], row["deleted"]) == (
        "offset_commit", "g", 12, 3, False)
    assert decode_record(key, None)["deleted"] is True
    assert decode_record(b"\x00\x05whatever", b"")["kind"] is None  # a newer coordinator record type
