"""KafkaApis: a failing request costs only its own answer, as Kafka's handleError does.

The handlers here are stand-ins registered for one test (the real ones need a running broker; the
integration test ``test_request_properties`` sends them every kind of request).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any
from unittest.mock import MagicMock

import pytest

from broker.handlers import HANDLERS, load_all
from broker.kafka_apis import KafkaApis
from broker.network.request_channel import Request, Response, ResponseAction
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.framing import decode_response, encode_request
from protocol.headers import parse_request_header
from protocol.messages import Message, MetadataRequest, MetadataResponse, ProduceRequest

load_all()


def _request(api_key: ApiKey, version: int, body: Message, correlation_id: int = 3) -> Request:
    frame = bytearray(encode_request(body, api_key, version, correlation_id, "unit")[4:])
    return Request(MagicMock(), "conn", parse_request_header(frame), frame, "PLAINTEXT", "PLAINTEXT",
                   ("127.0.0.1", 5000))


def _dispatch(monkeypatch: pytest.MonkeyPatch, api_key: ApiKey, handler: Any, request: Request) -> Response | None:
    monkeypatch.setitem(HANDLERS, api_key, handler)
    server = MagicMock()
    return asyncio.run(KafkaApis(server)(request))


def _decoded(response: Response, api_key: ApiKey, version: int) -> tuple[int, Any]:
    assert response.action is ResponseAction.SEND
    frame = b"".join(bytes(p) for p in response.parts)
    return decode_response(api_key, version, frame[4:])


METADATA_V11 = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])


def test_a_response_that_cannot_be_encoded_is_answered_with_the_api_error_response(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async def unencodable(services: Any, request: Request) -> Response:
        bad = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name=None)])  # not nullable in v11
        return Response.send(request, bad)

    with caplog.at_level(logging.ERROR):
        response = _dispatch(monkeypatch, ApiKey.METADATA, unencodable, _request(ApiKey.METADATA, 11, METADATA_V11))
    assert response is not None
    correlation_id, body = _decoded(response, ApiKey.METADATA, 11)
    assert correlation_id == 3
    assert [(t.name, t.error_code) for t in body.topics] == [("t", Errors.UNKNOWN_SERVER_ERROR)]
    assert "cannot encode MetadataResponse v11" in caplog.text  # the real cause, not "cannot parse"


def test_an_unexpected_handler_error_is_unknown_server_error_and_a_typed_one_its_own_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(services: Any, request: Request) -> Response:
        raise RuntimeError("a bug")

    async def refusing(services: Any, request: Request) -> Response:
        raise KafkaApiError(Errors.INVALID_REQUEST, "no")

    for handler, error in ((broken, Errors.UNKNOWN_SERVER_ERROR), (refusing, Errors.INVALID_REQUEST)):
        response = _dispatch(monkeypatch, ApiKey.METADATA, handler, _request(ApiKey.METADATA, 11, METADATA_V11))
        assert response is not None
        assert [t.error_code for t in _decoded(response, ApiKey.METADATA, 11)[1].topics] == [error]


def test_a_body_that_does_not_parse_closes_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(ApiKey.METADATA, 11, METADATA_V11)
    del request.buffer[-3:]
    response = _dispatch(monkeypatch, ApiKey.METADATA, HANDLERS[ApiKey.METADATA], request)
    assert response is not None and response.action is ResponseAction.CLOSE


def test_a_failed_acks_0_produce_closes_the_connection_as_in_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(services: Any, request: Request) -> Response:
        raise RuntimeError("a bug")

    for acks, action in ((0, ResponseAction.CLOSE), (1, ResponseAction.SEND)):
        body = ProduceRequest(acks=acks, timeout_ms=10, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=None)])])
        response = _dispatch(monkeypatch, ApiKey.PRODUCE, broken, _request(ApiKey.PRODUCE, 9, body))
        assert response is not None and response.action is action


def test_api_versions_reads_versions_and_bodies_it_does_not_know_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.kafka_apis import RegisteredApiVersionManager
    from protocol.messages import ApiVersionsRequest, ApiVersionsResponse

    frame = bytearray(encode_request(ApiVersionsRequest(), ApiKey.API_VERSIONS, 3, 9, "unit")[4:])
    frame[2:4] = (99).to_bytes(2, "big")  # a version from the future: Kafka answers it in v0
    request = Request(MagicMock(), "conn", parse_request_header(frame), frame, "PLAINTEXT", "PLAINTEXT",
                      ("127.0.0.1", 5000))
    server = MagicMock()
    server.services.api_version_manager = RegisteredApiVersionManager()
    response = asyncio.run(KafkaApis(server)(request))
    assert response is not None and response.action is ResponseAction.SEND
    frame_out = b"".join(bytes(p) for p in response.parts)
    assert ApiVersionsResponse.decode(frame_out[8:], 0).error_code == Errors.UNSUPPORTED_VERSION
