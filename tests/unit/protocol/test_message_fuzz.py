"""Decoders fed garbage raise ProtocolError only, quickly and without big allocations."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from message_strategies import message_strategy, versions_of
from protocol.exceptions import ProtocolError, UnsupportedVersionError
from protocol.messages import all_message_names, message_class

NAMES = all_message_names()
_BIG_VALUES = [struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -2), b"\xff\xff\xff\xff\x0f",
               b"\xff\xff\xff\xff\xff\xff",
               b"\x7f\xff", b"\x80\x00"]


def _decode(cls: type, raw: bytes, version: int) -> None:
    try:
        cls.decode(raw, version)
    except ProtocolError:
        pass


def _mutate(data: st.DataObject, raw: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["truncate", "flip", "overwrite", "insert", "random"]))
    if kind == "random" or not raw:
        return data.draw(st.binary(max_size=64))
    pos = data.draw(st.integers(0, len(raw) - 1))
    if kind == "truncate":
        return raw[:pos]
    if kind == "flip":
        return raw[:pos] + bytes([raw[pos] ^ data.draw(st.integers(1, 255))]) + raw[pos + 1:]
    if kind == "overwrite":
        value = data.draw(st.sampled_from(_BIG_VALUES))
        return raw[:pos] + value + raw[pos + len(value):]
    return raw[:pos] + data.draw(st.binary(min_size=1, max_size=8)) + raw[pos:]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_encodings_raise_only_protocol_error(name: str, data: st.DataObject) -> None:
    cls = message_class(name)
    version = data.draw(st.sampled_from(versions_of(name)))
    raw = bytes(data.draw(message_strategy(name, version)).encode(version))
    for _ in range(4):
        _decode(cls, _mutate(data, raw), version)


@pytest.mark.parametrize("name", NAMES)
def test_every_truncation_and_big_length_is_rejected(name: str) -> None:
    """Deterministic sweep over each version's default encoding."""
    cls = message_class(name)
    for version in versions_of(name):
        raw = bytes(cls().encode(version))
        for cut in range(len(raw)):
            with pytest.raises(ProtocolError):
                cls.decode(raw[:cut], version)
        with pytest.raises(ProtocolError):
            cls.decode(raw + b"\x00", version)
        for pos in range(len(raw)):
            for value in _BIG_VALUES:
                _decode(cls, raw[:pos] + value + raw[pos + len(value):], version)


def test_huge_length_prefixes_do_not_allocate() -> None:
    fetch = message_class("FetchResponse")
    produce = message_class("ProduceRequest")
    metadata = message_class("MetadataRequest")
    attacks = [
        (produce, 3, b"\xff\xff\x00\x01\x00\x00\x03\xe8" + b"\x7f\xff\xff\xff"),  # topic count
        (produce, 9, b"\x00\x00\x01\x00\x00\x03\xe8" + b"\xff\xff\xff\xff\x0f"),  # compact topic count
        (fetch, 4, b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01"
         + bytes(4 + 2 + 8 + 8) + b"\x7f\xff\xff\xff"),  # aborted transactions count
        (metadata, 1, b"\x7f\xff\xff\xff"),
    ]
    tracemalloc.start()
    try:
        for cls, version, raw in attacks:
            with pytest.raises(ProtocolError):
                cls.decode(raw, version)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_unknown_versions_raise_unsupported_version() -> None:
    produce = message_class("ProduceRequest")
    with pytest.raises(UnsupportedVersionError):
        produce.decode(b"", 12)
    with pytest.raises(UnsupportedVersionError):
        produce().encode(-1)
    with pytest.raises(UnsupportedVersionError):
        message_class("FetchRequest").ReplicaState().encode(14)  # struct only exists from v15


@pytest.mark.parametrize("raw, message", [
    (b"\x00\x02\xff\xfe", "UTF-8"),
    (b"\x00\x05ab", "exceeds"),
    (b"\xff\xfe", "invalid length"),
])
def test_error_messages_say_what_is_wrong(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        message_class("SaslHandshakeRequest").decode(raw, 1)


def test_encoding_invalid_values_raises_protocol_error() -> None:
    produce = message_class("ProduceRequest")
    with pytest.raises(ProtocolError, match="ProduceRequest v3"):
        produce(acks=70000).encode(3)
    with pytest.raises(ProtocolError):
        produce(topic_data=[produce.TopicProduceData(name=None)]).encode(3)
    with pytest.raises(ProtocolError):
        produce(transactional_id="x" * 40000).encode(3)


def test_setting_a_field_missing_from_the_version_is_refused_unless_ignorable() -> None:
    produce = message_class("ProduceRequest")
    with pytest.raises(UnsupportedVersionError, match="TransactionalId"):
        produce(transactional_id="txn").encode(2)
    assert produce(transactional_id="txn").encode(3)
    metadata = message_class("MetadataResponse")
    # ThrottleTimeMs is ignorable: silently left out of v0, like Kafka does.
    assert metadata(throttle_time_ms=100).encode(0) == metadata().encode(0)
    with pytest.raises(UnsupportedVersionError, match="tagged"):
        metadata(unknown_tagged_fields={3: b"x"}).encode(8)  # v8 has no tagged fields
    assert metadata(unknown_tagged_fields={3: b"x"}).encode(9)
