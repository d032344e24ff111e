"""Request/response headers (with Kafka's two exceptions), framing, tagged-field preservation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api_keys import API_SPECS, ApiKey, request_header_version, response_header_version
from protocol.exceptions import ProtocolError
from protocol.framing import decode_request, decode_response, encode_request, encode_response, encode_response_parts
from protocol.headers import (
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)
from protocol.messages import (
    ApiVersionsResponse,
    ControlledShutdownRequest,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
    ResponseHeader,
)


def test_header_versions_follow_flexibility() -> None:
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert request_header_version(ApiKey.SASL_HANDSHAKE, 1) == 1  # never flexible
    assert response_header_version(ApiKey.METADATA, 8) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 1) == 1
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 3) == 2
    frame = encode_request(ControlledShutdownRequest(broker_id=3), ApiKey.CONTROLLED_SHUTDOWN, 0, 11, "ignored")
    assert frame[4:] == struct.pack(">hhii", 7, 0, 11, 3)  # no client id at all
    header, body = decode_request(frame[4:])
    assert (header.header_version, header.client_id, header.header_size, body.broker_id) == (0, None, 8, 3)


def test_api_versions_response_always_uses_header_v0() -> None:
    for version in range(5):
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0
    response = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, max_version=4)])
    frame = encode_response(response, ApiKey.API_VERSIONS, 3, 99)
    assert frame[4:8] == struct.pack(">i", 99) and frame[8:] == response.encode(3)
    assert decode_response(ApiKey.API_VERSIONS, 3, frame[4:]) == (99, response)


def test_request_header_matches_the_schema_encoding() -> None:
    for version, api_key, api_version in ((1, ApiKey.METADATA, 8), (2, ApiKey.METADATA, 12)):
        for client_id in ("client-1", None, "é"):
            raw = encode_request_header(api_key, api_version, 1234, client_id)
            generic = RequestHeader(request_api_key=api_key, request_api_version=api_version,
                                    correlation_id=1234, client_id=client_id).encode(version)
            assert raw == generic  # ClientId keeps its int16 length even in header v2
            parsed = parse_request_header(raw + b"body")
            assert (parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id) == (
                api_key, api_version, 1234, client_id)
            assert parsed.header_size == len(raw) and parsed.header_version == version


@settings(max_examples=300, deadline=None)
@given(api_key=st.sampled_from(sorted(API_SPECS)), version=st.integers(0, 20),
       correlation_id=st.integers(-(1 << 31), (1 << 31) - 1), client_id=st.none() | st.text(max_size=30))
def test_any_request_header_round_trips(api_key: ApiKey, version: int, correlation_id: int,
                                        client_id: str | None) -> None:
    raw = encode_request_header(api_key, version, correlation_id, client_id)
    header = parse_request_header(raw + b"\x00body")
    header_version = request_header_version(api_key, version)
    expected_client = client_id if header_version >= 1 else None
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, correlation_id, expected_client)
    assert header.header_size == len(raw) and header.header_version == header_version
    generic = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                            client_id=expected_client)
    assert raw == generic.encode(header_version)


def test_request_header_v2_skips_tagged_fields() -> None:
    generic = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=5, client_id="c",
                            unknown_tagged_fields={4: b"xyz", 300: b""})
    raw = generic.encode(2)
    parsed = parse_request_header(bytes(raw) + b"\x01\x02")
    assert parsed.header_size == len(raw) and parsed.client_id == "c"
    assert RequestHeader.decode(raw, 2) == generic


def test_newer_api_versions_request_header_is_parsed_as_flexible() -> None:
    raw = encode_request_header(ApiKey.API_VERSIONS, 99, 1, "future")
    header = parse_request_header(raw)
    assert header.header_version == 2 and header.api_version == 99 and header.client_id == "future"


@pytest.mark.parametrize("raw", [
    b"", b"\x00\x03\x00", b"\x00\x03\x00\x0c\x00\x00\x00\x01",  # fixed part or client id length missing
    b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05ab",  # client id past the end
    b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe",  # negative length other than -1
    b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x02\xff\xfe",  # invalid UTF-8
    b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff\x01\x00\x05ab",  # tagged field past the end
    b"\x7f\x00\x00\x00\x00\x00\x00\x01\xff\xff",  # unknown api key
])
def test_bad_request_headers_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_request_header(raw)


def test_response_headers() -> None:
    assert encode_response_header(7, 0) == struct.pack(">i", 7)
    assert encode_response_header(7, 1) == struct.pack(">i", 7) + b"\x00"
    assert encode_response_header(7, 1) == ResponseHeader(correlation_id=7).encode(1)
    assert parse_response_header(b"\x00\x00\x00\x07\x00rest", 1) == (7, 5)
    assert parse_response_header(b"\x00\x00\x00\x07rest", 0) == (7, 4)
    with pytest.raises(ProtocolError):
        parse_response_header(b"\x00\x00", 0)
    with pytest.raises(ProtocolError):
        encode_response_header(7, 2)


def test_request_round_trip_through_frames() -> None:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    for version in (0, 4, 9, 12):
        frame = encode_request(request, ApiKey.METADATA, version, 42, "me")
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        header, body = decode_request(frame[4:])
        assert header.correlation_id == 42 and header.client_id == "me"
        assert body.topics[0].name == "t"


def test_unknown_tagged_fields_are_preserved_and_reemitted() -> None:
    partition = FetchResponse.PartitionData(partition_index=1, records=b"batch",
                                            unknown_tagged_fields={9: b"\x01\x02", 3: b""})
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])],
                             unknown_tagged_fields={5: b"top"})
    encoded = response.encode(12)
    decoded = FetchResponse.decode(encoded, 12)
    assert decoded.unknown_tagged_fields == {5: b"top"}
    assert decoded.responses[0].partitions[0].unknown_tagged_fields == {3: b"", 9: b"\x01\x02"}
    assert decoded.encode(12) == encoded
    # A known tagged field (tag 0, DivergingEpoch) between unknown ones keeps tag order on the wire.
    decoded.responses[0].partitions[0].diverging_epoch.epoch = 4
    again = FetchResponse.decode(decoded.encode(12), 12)
    assert again.responses[0].partitions[0].diverging_epoch.epoch == 4
    assert again.responses[0].partitions[0].unknown_tagged_fields == {3: b"", 9: b"\x01\x02"}


def test_tagged_fields_equal_to_default_are_omitted() -> None:
    plain = ApiVersionsResponse().encode(3)
    assert ApiVersionsResponse(finalized_features_epoch=-1, zk_migration_ready=False).encode(3) == plain
    assert plain[-1] == 0  # empty tagged-field section
    with_epoch = ApiVersionsResponse(finalized_features_epoch=7).encode(3)
    assert len(with_epoch) == len(plain) + 1 + 1 + 8


def test_encode_parts_keeps_records_sources_separate() -> None:
    class Slice:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def __len__(self) -> int:
            return len(self.data)

        def read_bytes(self) -> bytes:
            return self.data

    source = Slice(b"R" * 100)
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(partition_index=0, records=source)])])
    for version in (4, 12):
        parts = response.encode_parts(version)
        assert any(p is source for p in parts)
        joined = b"".join(p.read_bytes() if p is source else bytes(p) for p in parts)
        assert joined == response.encode(version) and len(joined) == response.encoded_size(version)
        frame_parts = encode_response_parts(response, ApiKey.FETCH, version, 1)
        total = sum(len(p) for p in frame_parts)
        assert struct.unpack_from(">i", frame_parts[0])[0] == total - 4


def test_records_decode_to_zero_copy_views() -> None:
    request = ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"abcdef")])])
    buf = request.encode(9)
    decoded = ProduceRequest.decode(buf, 9)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    records[0] = ord("X")  # writes through to the request buffer
    assert b"Xbcdef" in buf
    assert ProduceRequest.decode(bytes(buf), 9).topic_data[0].partition_data[0].records.readonly

