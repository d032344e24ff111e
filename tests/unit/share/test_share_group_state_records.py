"""__share_group_state keys and values: round trips and the byte layout of a key."""

from __future__ import annotations

import uuid

import pytest

from protocol import share_group_state_records as records
from protocol.exceptions import ProtocolError

TOPIC = uuid.UUID("00000000-0000-0000-0000-000000000001")


def test_key_layout_and_round_trip():
    key = records.ShareStateKey(records.UPDATE_RECORD_TYPE, "g", TOPIC, 3)
    encoded = records.encode_key(key)
    assert encoded == b"\x00\x01" + b"\x00\x01g" + TOPIC.bytes + b"\x00\x00\x00\x03"
    assert records.decode_key(encoded) == key
    with pytest.raises(ProtocolError):
        records.decode_key(b"\x00\x07" + encoded[2:])


def test_values_round_trip_with_and_without_the_delivery_complete_count():
    batches = [records.PersistedBatch(5, 9, 0, 2), records.PersistedBatch(10, 10, 4, 5)]
    snapshot = records.ShareSnapshotValue(3, 1, 7, 5, 1000, 2000, batches, delivery_complete_count=4)
    assert records.decode_snapshot_value(records.encode_snapshot_value(snapshot)) == snapshot
    update = records.ShareUpdateValue(3, 7, -1, batches)
    assert records.decode_update_value(records.encode_update_value(update)) == update
    with pytest.raises(ProtocolError):
        records.decode_update_value(records.encode_update_value(update)[:-3])
