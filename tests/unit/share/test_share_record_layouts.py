"""The bytes of every share-group record, written out by hand from Kafka 4.2's definitions.

Kafka's coordinator records are a key (int16 record type, then the key's fields at version 0,
non-flexible: int16-length strings) and a value (int16 version 0, then the fields in the flexible
encoding: compact strings and arrays are a uvarint of length + 1, a null compact string is 0x00,
every struct and the value itself end with a tagged-field count, 0x00 when there are none).
The expected bytes below come from those rules and the field lists of Kafka's JSON definitions
(group-coordinator and share-coordinator ``common/message/``), not from our schemas or codecs, so
a field added, dropped, moved or retyped on our side fails here.
"""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.share import share_group_records as records
from broker.coordinator.share.share_group import ShareGroup, ShareGroupMember
from protocol.share_group_state_records import (
    PersistedBatch,
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
    decode_snapshot_value,
    decode_update_value,
    encode_key,
    encode_snapshot_value,
    encode_update_value,
)

TOPIC = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
TOPIC_HEX = "000102030405060708090a0b0c0d0e0f"
GROUP_KEY = "0001 67"  # "g" as a classic string
MEMBER_KEY = GROUP_KEY + " 0001 6d"  # then "m"


def _hex(spaced: str) -> bytes:
    return bytes.fromhex(spaced.replace(" ", ""))


def _group() -> tuple[ShareGroup, ShareGroupMember]:
    member = ShareGroupMember("m", member_epoch=3, client_id="c", client_host="h", subscribed_topic_names=["t"],
                              rack_id="r", assignment={TOPIC: [1]}, previous_member_epoch=2)
    group = ShareGroup("g", group_epoch=5, assignment_epoch=3, members={"m": member}, metadata_hash=7,
                       initialized_topics={TOPIC: ("t", frozenset({0, 1}))})
    return group, member


def _consumer_offsets_records() -> dict[str, tuple[bytes, bytes | None]]:
    group, member = _group()
    targets = records.target_assignment_records(group, {"m": {TOPIC: [0, 2]}})
    return {"member metadata": records.member_metadata_record("g", member),
            "group metadata": records.group_epoch_record(group),
            "target assignment member": targets[0],
            "target assignment metadata": targets[1],
            "current member assignment": records.current_assignment_record("g", member),
            "state partition metadata": records.state_partition_record(group)}


EXPECTED = {
    # type 10: RackId (nullable), ClientId, ClientHost, SubscribedTopicNames
    "member metadata": (f"000a {MEMBER_KEY}", "0000 0272 0263 0268 02 0274 00"),
    # type 11: Epoch int32, MetadataHash int64
    "group metadata": (f"000b {GROUP_KEY}", "0000 00000005 0000000000000007 00"),
    # type 13: TopicPartitions [{TopicId, Partitions []int32}]
    "target assignment member": (f"000d {MEMBER_KEY}", f"0000 02 {TOPIC_HEX} 03 00000000 00000002 00 00"),
    # type 12: AssignmentEpoch int32
    "target assignment metadata": (f"000c {GROUP_KEY}", "0000 00000003 00"),
    # type 14: MemberEpoch, PreviousMemberEpoch int32, State int8, AssignedPartitions [{TopicId, Partitions}]
    "current member assignment": (f"000e {MEMBER_KEY}",
                                  f"0000 00000003 00000002 00 02 {TOPIC_HEX} 02 00000001 00 00"),
    # type 15: InitializingTopics, InitializedTopics [{TopicId, TopicName, Partitions}], DeletingTopics
    "state partition metadata": (f"000f {GROUP_KEY}",
                                 f"0000 01 02 {TOPIC_HEX} 0274 03 00000000 00000001 00 01 00"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_consumer_offsets_share_records_have_kafkas_layout(name: str) -> None:
    key, value = _consumer_offsets_records()[name]
    assert (key.hex(), None if value is None else value.hex()) == \
        (_hex(EXPECTED[name][0]).hex(), _hex(EXPECTED[name][1]).hex())


def test_a_member_without_rack_writes_a_null_compact_string() -> None:
    _, member = _group()
    member.rack_id = None
    assert records.member_metadata_record("g", member)[1] == _hex("0000 00 0263 0268 02 0274 00")


def test_tombstones_have_the_same_keys() -> None:
    group, _ = _group()
    assert [k for k, v in records.member_tombstones("g", "m") if v is None] == \
        [_hex(f"{kind} {MEMBER_KEY}") for kind in ("000e", "000d", "000a")]
    assert [k for k, v in records.group_tombstones(group) if v is None] == \
        [_hex(f"{kind} {GROUP_KEY}") for kind in ("000f", "000c", "000b")]


# __share_group_state: type 0 ShareSnapshot, type 1 ShareUpdate; key GroupId, TopicId, Partition
BATCH = PersistedBatch(first_offset=10, last_offset=12, delivery_state=2, delivery_count=1)
BATCH_HEX = "000000000000000a 000000000000000c 02 0001 00"


def test_share_snapshot_record_has_kafkas_layout() -> None:
    assert encode_key(ShareStateKey(0, "g", TOPIC, 4)) == _hex(f"0000 {GROUP_KEY} {TOPIC_HEX} 00000004")
    value = ShareSnapshotValue(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=10,
                               create_timestamp=100, write_timestamp=200, state_batches=[BATCH])
    # SnapshotEpoch, StateEpoch, LeaderEpoch int32, StartOffset, CreateTimestamp, WriteTimestamp int64,
    # StateBatches [{FirstOffset, LastOffset int64, DeliveryState int8, DeliveryCount int16}]
    fixed = "0000 00000001 00000002 00000003 000000000000000a 0000000000000064 00000000000000c8"
    assert encode_snapshot_value(value) == _hex(f"{fixed} 02 {BATCH_HEX} 00")
    # DeliveryCompleteCount (KIP-1226) is tagged field 0, written only when it is not -1
    counted = ShareSnapshotValue(1, 2, 3, 10, 100, 200, [BATCH], delivery_complete_count=3)
    assert encode_snapshot_value(counted) == _hex(f"{fixed} 02 {BATCH_HEX} 01 00 04 00000003")
    assert decode_snapshot_value(encode_snapshot_value(counted)) == counted


def test_share_update_record_has_kafkas_layout() -> None:
    assert encode_key(ShareStateKey(1, "g", TOPIC, 4)) == _hex(f"0001 {GROUP_KEY} {TOPIC_HEX} 00000004")
    # SnapshotEpoch, LeaderEpoch int32, StartOffset int64 (-1: unchanged), StateBatches
    value = ShareUpdateValue(snapshot_epoch=1, leader_epoch=3, start_offset=-1, state_batches=[BATCH])
    assert encode_update_value(value) == _hex(f"0000 00000001 00000003 ffffffffffffffff 02 {BATCH_HEX} 00")
    empty = ShareUpdateValue(1, 3, 7, [], delivery_complete_count=0)
    assert encode_update_value(empty) == _hex("0000 00000001 00000003 0000000000000007 01 01 00 04 00000000")
    assert decode_update_value(encode_update_value(empty)) == empty
