"""__transaction_state keys and values: round trips, and the byte layout of Kafka's own JSON schemas."""
from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.coordinator_record_codec import encode_uvarint
from protocol.exceptions import ProtocolError
from protocol.transaction_log_records import (
    PartitionsSchema,
    TransactionLogKey,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

REPO = Path(__file__).resolve().parents[3]
RECORDS = REPO.parent / "shared" / "kafka-protocol" / "records"

ONGOING = TransactionLogValue(
    producer_id=4001, producer_epoch=7, transaction_timeout_ms=60000, transaction_status=1,
    transaction_partitions=[PartitionsSchema("orders", [0, 3]), PartitionsSchema("__consumer_offsets", [17])],
    transaction_last_update_timestamp_ms=1_700_000_000_123, transaction_start_timestamp_ms=1_700_000_000_000)
EMPTY = TransactionLogValue(4001, 8, 60000, 0, None, 1_700_000_001_000, -1)


def test_key_round_trip_and_bytes() -> None:
    key = TransactionLogKey("txn-ø")
    data = encode_key(key)
    assert data == b"\x00\x00" + struct.pack(">h", 6) + "txn-ø".encode()
    assert decode_key(data) == key


def test_key_of_another_version_is_not_a_transaction_key() -> None:
    assert decode_key(b"\x00\x01\x00\x01x") is None  # Kafka's UnknownKey: skipped on load


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("value", [ONGOING, EMPTY], ids=["ongoing", "empty"])
def test_values_round_trip(value: TransactionLogValue, version: int) -> None:
    value = TransactionLogValue(**{**value.__dict__, "version": version})
    assert decode_value(encode_value(value)) == value


def test_version_0_bytes_written_out() -> None:
    """A 3.9 broker writes value version 0: non-compact strings and int32 array lengths, no tagged fields."""
    expected = (struct.pack(">hqhib", 0, 4001, 8, 60000, 0) + struct.pack(">i", -1)
                + struct.pack(">qq", 1_700_000_001_000, -1))
    assert encode_value(EMPTY) == expected


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x02" + bytes(30), b"\x00\x00" + bytes(10)])
def test_bad_values_raise_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_value(data)


# --- against Kafka's JSON schema (../shared/kafka-protocol/records) ------------------------------------

def _kafka_schema(name: str) -> dict[str, Any]:
    if not (RECORDS / f"{name}.json").is_file():
        pytest.skip(f"Kafka's record schemas not found at {RECORDS} (../shared is absent)")
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from import_schemas import load_kafka_json
    finally:
        sys.path.pop(0)
    return load_kafka_json(RECORDS / f"{name}.json")


def _in(versions: str, version: int) -> bool:
    if versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


def _schema_encode(fields: list[dict[str, Any]], values: dict[str, Any], version: int, flexible: bool) -> bytes:
    """An independent encoder driven by the JSON field list (only the types these records use)."""
    fixed = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}
    out = b""
    for f in fields:
        if not _in(f["versions"], version):
            continue
        value = values[f["name"]]
        kind = f["type"]
        if kind in fixed:
            out += struct.pack(fixed[kind], value)
        elif kind == "string":
            raw = value.encode()
            out += (encode_uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw
        elif kind.startswith("[]"):
            if value is None:
                assert _in(f.get("nullableVersions", "none"), version)
                out += encode_uvarint(0) if flexible else struct.pack(">i", -1)
                continue
            out += encode_uvarint(len(value) + 1) if flexible else struct.pack(">i", len(value))
            for element in value:
                if "fields" in f:
                    out += _schema_encode(f["fields"], element, version, flexible)
                else:
                    out += struct.pack(fixed[kind[2:]], element)
        else:
            raise AssertionError(f"type {kind} not used by these records")
    return out + (encode_uvarint(0) if flexible else b"")


@pytest.mark.parametrize("version", [0, 1])
def test_value_layout_is_kafkas_schema(version: int) -> None:
    schema = _kafka_schema("TransactionLogValue")
    assert _in(schema["validVersions"], version)
    flexible = _in(schema["flexibleVersions"], version)
    fields = {
        "ProducerId": 4001, "ProducerEpoch": 7, "TransactionTimeoutMs": 60000, "TransactionStatus": 1,
        "TransactionPartitions": [{"Topic": "orders", "PartitionIds": [0, 3]},
                                  {"Topic": "__consumer_offsets", "PartitionIds": [17]}],
        "TransactionLastUpdateTimestampMs": 1_700_000_000_123, "TransactionStartTimestampMs": 1_700_000_000_000}
    kafka_bytes = struct.pack(">h", version) + _schema_encode(schema["fields"], fields, version, flexible)
    ours = TransactionLogValue(**{**ONGOING.__dict__, "version": version})
    assert encode_value(ours) == kafka_bytes
    assert decode_value(kafka_bytes) == ours


def test_key_layout_is_kafkas_schema() -> None:
    schema = _kafka_schema("TransactionLogKey")
    assert schema["validVersions"] == "0"
    kafka_bytes = b"\x00\x00" + _schema_encode(schema["fields"], {"TransactionalId": "my-txn"}, 0, False)
    assert encode_key(TransactionLogKey("my-txn")) == kafka_bytes


# Records a real Kafka 3.9 broker wrote to __transaction_state for one committed transaction (read from its
# segment file): InitProducerId, AddPartitionsToTxn of orders-0/1, EndTxn commit, the markers' completion.
KAFKA_39_RECORDS = [
    ("0000000000000000000000000000ea6000ffffffff000001a214acd750ffffffffffffffff",
     (0, 0, 60000, 0, None, 1795643201360, -1)),
    ("0000000000000000000000000000ea60010000000100066f7264657273000000020000000000000001000001a214acd7fd"
     "000001a214acd7fd", (0, 0, 60000, 1, [PartitionsSchema("orders", [0, 1])], 1795643201533, 1795643201533)),
    ("0000000000000000000000000000ea60020000000100066f7264657273000000020000000000000001000001a214acd862"
     "000001a214acd7fd", (0, 0, 60000, 2, [PartitionsSchema("orders", [0, 1])], 1795643201634, 1795643201533)),
    ("0000000000000000000000000000ea600400000000000001a214acd868000001a214acd7fd",
     (0, 0, 60000, 4, [], 1795643201640, 1795643201533)),
]


@pytest.mark.parametrize(("value_hex", "fields"), KAFKA_39_RECORDS, ids=["empty", "ongoing", "prepare", "complete"])
def test_records_written_by_kafka_decode_and_encode_byte_for_byte(value_hex: str, fields: tuple) -> None:
    data = bytes.fromhex(value_hex)
    value = decode_value(data)
    assert value == TransactionLogValue(*fields)
    assert encode_value(value) == data
    assert decode_key(bytes.fromhex("000000027431")) == TransactionLogKey("t1")
