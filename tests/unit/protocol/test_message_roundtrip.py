"""Every message at every version: random object -> encode -> decode -> equal."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from message_strategies import message_strategy, versions_of
from protocol.messages import MetadataResponse, all_message_names, message_class

NAMES = all_message_names()


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_round_trip_every_version(name: str, data: st.DataObject) -> None:
    cls = message_class(name)
    for version in versions_of(name):
        obj = data.draw(message_strategy(name, version), label=f"v{version}")
        encoded = obj.encode(version)
        assert len(encoded) == obj.encoded_size(version)
        decoded = cls.decode(bytes(encoded), version)
        assert decoded == obj
        assert decoded.encode(version) == encoded


def test_all_definitions_are_bundled() -> None:
    """Kafka 3.9's 186 definitions, plus the share-group offsets APIs (90-92) taken from Kafka 4.2."""
    assert len(NAMES) == 186 + 6


def test_long_and_short_fixed_arrays_round_trip() -> None:
    """Arrays past the precompiled-Struct sizes take the general path, in both encodings."""
    for count in (0, 1, 63, 64, 126, 127, 200):
        partition = MetadataResponse.MetadataResponsePartition(
            replica_nodes=list(range(count)), isr_nodes=list(range(count // 2)), offline_replicas=[7] * (count % 5))
        response = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="t", partitions=[partition])])
        for version in (0, 5, 9, 12):
            encoded = response.encode(version)
            assert len(encoded) == response.encoded_size(version)
            decoded = MetadataResponse.decode(encoded, version)
            if version < 5:
                partition_out = decoded.topics[0].partitions[0]
                assert partition_out.replica_nodes == partition.replica_nodes
                assert partition_out.isr_nodes == partition.isr_nodes
            else:
                assert decoded == response


def test_long_and_non_ascii_strings_and_bytes_round_trip() -> None:
    """Multi-byte varint lengths and UTF-8 sizes that differ from the character count."""
    sasl = message_class("SaslAuthenticateRequest")
    topic = MetadataResponse.MetadataResponseTopic
    for text in ("t" * 126, "t" * 127, "é" * 100, "日本" * 3000):
        response = MetadataResponse(cluster_id=text, topics=[topic(name=text[:200])])
        for version in (2, 9, 12):
            encoded = response.encode(version)
            assert len(encoded) == response.encoded_size(version)
            assert MetadataResponse.decode(encoded, version) == response
    for size in (0, 126, 127, 128, 20000, 70000):
        request = sasl(auth_bytes=bytes(range(256)) * (size // 256) + b"x" * (size % 256))
        for version in (0, 2):
            encoded = request.encode(version)
            assert len(encoded) == request.encoded_size(version)
            assert sasl.decode(encoded, version) == request
