from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.admin.waiting import respond_when, wait_until
from broker.network.request_channel import ResponseAction


def test_wait_until_returns_whether_the_condition_held() -> None:
    async def run() -> tuple[bool, bool, bool]:
        flips = iter([False, False, True])
        return (
            await wait_until(lambda: True, 0),
            await wait_until(lambda: False, 0),
            await wait_until(lambda: next(flips), 10_000),
        )

    assert asyncio.run(run()) == (True, False, True)


class _Channel:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.done = asyncio.Event()

    def send_response(self, response: Any) -> None:
        self.sent.append(response)
        self.done.set()


def _request() -> Any:
    return SimpleNamespace(connection_id="c1", header="h")


def test_respond_when_sends_the_response_once_the_condition_holds() -> None:
    async def run() -> list[Any]:
        channel = _Channel()
        state = {"ready": False}
        respond_when(SimpleNamespace(request_channel=channel), _request(), lambda: state["ready"], 10_000,
                     lambda: "answer")
        await asyncio.sleep(0)
        assert channel.sent == []
        state["ready"] = True
        await channel.done.wait()
        return channel.sent

    assert asyncio.run(run()) == ["answer"]


def test_respond_when_answers_the_api_error_if_building_the_response_fails() -> None:
    """As for any failed request, Kafka's error response (UNKNOWN_SERVER_ERROR), not a closed connection."""
    from unittest.mock import MagicMock

    from broker.handlers import load_all
    from broker.network.request_channel import Request
    from protocol.api_keys import ApiKey
    from protocol.errors import Errors
    from protocol.framing import decode_response, encode_request
    from protocol.headers import parse_request_header
    from protocol.messages import CreateTopicsRequest

    load_all()
    body = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(name="t", num_partitions=1,
                                                                          replication_factor=1)])
    frame = bytearray(encode_request(body, ApiKey.CREATE_TOPICS, 7, 4, "unit")[4:])
    request = Request(MagicMock(), "c1", parse_request_header(frame), frame, "PLAINTEXT", "PLAINTEXT",
                      ("127.0.0.1", 1))

    async def run() -> list[Any]:
        channel = _Channel()

        def broken() -> Any:
            raise RuntimeError("boom")

        respond_when(SimpleNamespace(request_channel=channel), request, lambda: True, 0, broken)
        await channel.done.wait()
        return channel.sent

    (response,) = asyncio.run(run())
    assert response.action == ResponseAction.SEND
    _, answer = decode_response(ApiKey.CREATE_TOPICS, 7, b"".join(bytes(p) for p in response.parts)[4:])
    assert [(t.name, t.error_code) for t in answer.topics] == [("t", Errors.UNKNOWN_SERVER_ERROR)]
