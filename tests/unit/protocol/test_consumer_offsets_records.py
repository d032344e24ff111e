"""__consumer_offsets keys and values: every version Kafka writes round-trips; golden logs decode."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from protocol.exceptions import ProtocolError
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from protocol.consumer_offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)


@pytest.mark.parametrize("key", [OffsetCommitKey("g", "t", 3, 0), OffsetCommitKey("grp", "tøpic", 7, 1),
                                 GroupMetadataKey("group-1")])
def test_keys_round_trip(key) -> None:
    assert decode_key(encode_key(key)) == key


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_values_round_trip(version: int) -> None:
    value = OffsetCommitValue(42, "meta", 1_700_000_000_000,
                              leader_epoch=5 if version >= 3 else -1,
                              expire_timestamp=1_800_000_000_000 if version == 1 else -1, version=version)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_values_round_trip(version: int) -> None:
    member = MemberMetadata("m-1", "client", "/10.0.0.1", 10000, b"sub", b"assign",
                            rebalance_timeout=30000 if version >= 1 else -1,
                            group_instance_id="static-1" if version >= 3 else None)
    value = GroupMetadataValue("consumer", 3, "range", "m-1", [member],
                               current_state_timestamp=1_700_000_000_000 if version >= 2 else -1, version=version)
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


def test_bad_input_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="unknown version"):
        decode_key(b"\x00\x09")
    with pytest.raises(ProtocolError, match="truncated"):
        decode_offset_commit_value(encode_offset_commit_value(OffsetCommitValue(1, "m", 2))[:-3])


def test_golden_consumer_offsets_decode(golden: Path) -> None:
    segment = golden / "k300-consumer-offsets" / "__consumer_offsets-13" / "00000000000000000000.log"
    data = segment.read_bytes()
    kinds = collections.Counter()
    for pos, _header in iter_log_entries(data):
        for record in decode_entry_records(data, pos):
            key = decode_key(record.key)
            if isinstance(key, OffsetCommitKey):
                value = decode_offset_commit_value(record.value)
                assert encode_offset_commit_value(value) == record.value
            else:
                value = decode_group_metadata_value(record.value)
                assert encode_group_metadata_value(value) == record.value
            kinds[(type(key).__name__, key.version, value.version)] += 1
    assert kinds == {("OffsetCommitKey", 1, 3): 3068, ("GroupMetadataKey", 2, 3): 25}
