"""Pure parts of the network layer: RequestChannel, ApiVersionManager, ConnectionQuotas."""
from __future__ import annotations

import asyncio
import dataclasses
from unittest.mock import MagicMock

import pytest

from broker.config_defs import ConfigError
from broker.network.api_version_manager import ApiVersionManager
from broker.network.connection_quotas import ConnectionQuotas, normalize_ip
from broker.network.request_channel import Request, RequestChannel, Response, ResponseAction
from broker.network.request_handler import MAX_REQUESTS_WITHOUT_YIELD, KafkaRequestHandlerPool
from protocol.api_keys import API_SPECS, ApiKey
from protocol.framing import encode_request
from protocol.headers import parse_request_header
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse


def make_request(correlation_id: int = 1, processor: object | None = None) -> Request:
    frame = bytearray(encode_request(ApiVersionsRequest(client_software_name="x", client_software_version="1"),
                                     ApiKey.API_VERSIONS, 3, correlation_id, "c")[4:])
    return Request(processor or MagicMock(), f"conn-{correlation_id}", parse_request_header(frame), frame,
                   "PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 5000))


# --- Request / Response ---------------------------------------------------------------------------

def test_request_body_is_decoded_lazily_from_the_frame():
    request = make_request(7)
    assert request.header.correlation_id == 7
    assert str(request.principal) == "User:ANONYMOUS"
    assert request.body() == ApiVersionsRequest(client_software_name="x", client_software_version="1")
    assert request.body() is request.body()


def test_response_send_encodes_size_header_and_body():
    request = make_request(9)
    response = Response.send(request, ApiVersionsResponse(throttle_time_ms=5))
    frame = b"".join(bytes(p) for p in response.parts)
    assert response.action is ResponseAction.SEND
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4 == response.size() - 4
    assert int.from_bytes(frame[4:8], "big") == 9  # ApiVersions: response header v0
    assert ApiVersionsResponse.decode(frame[8:], 3).throttle_time_ms == 5
    assert Response.no_op(request).parts == [] and Response.close(request).action is ResponseAction.CLOSE


# --- RequestChannel -------------------------------------------------------------------------------

def test_channel_is_bounded_and_fifo():
    async def scenario() -> None:
        channel = RequestChannel(2)
        a, b, c = make_request(1), make_request(2), make_request(3)
        assert channel.try_send_request(a) and channel.try_send_request(b)
        assert not channel.try_send_request(c)
        assert len(channel) == 2
        assert await channel.receive_request() is a
        assert a.dequeue_time_ns is not None
        assert channel.try_send_request(c)
        assert [await channel.receive_request(), await channel.receive_request()] == [b, c]
    asyncio.run(scenario())


def test_waiting_receiver_gets_the_request_directly():
    async def scenario() -> None:
        channel = RequestChannel(1)
        receiver = asyncio.create_task(channel.receive_request())
        await asyncio.sleep(0)
        request = make_request()
        assert channel.try_send_request(request)
        assert len(channel) == 0
        assert await receiver is request
    asyncio.run(scenario())


def test_space_waiters_are_called_when_a_slot_frees():
    async def scenario() -> None:
        channel = RequestChannel(1)
        assert channel.try_send_request(make_request(1))
        resumed: list[str] = []
        channel.wait_for_space(lambda: resumed.append("gone"))  # takes no slot: the next one runs too
        channel.wait_for_space(lambda: (resumed.append("b"), channel.try_send_request(make_request(2))))
        channel.wait_for_space(lambda: resumed.append("c"))
        await channel.receive_request()
        assert resumed == ["gone", "b"]
        await channel.receive_request()
        assert resumed == ["gone", "b", "c"]
    asyncio.run(scenario())


def test_close_wakes_receivers_and_refuses_requests():
    async def scenario() -> None:
        channel = RequestChannel(1)
        receivers = [asyncio.create_task(channel.receive_request()) for _ in range(3)]
        await asyncio.sleep(0)
        channel.close()
        assert await asyncio.gather(*receivers) == [None, None, None]
        assert not channel.try_send_request(make_request())
        assert await channel.receive_request() is None
    asyncio.run(scenario())


def test_send_response_routes_to_the_owning_processor():
    processor = MagicMock()
    request = make_request(processor=processor)
    response = Response.no_op(request)
    RequestChannel(1).send_response(response)
    processor.enqueue_response.assert_called_once_with(response)


def test_a_request_let_through_by_a_response_waits_for_the_worker_sending_it():
    async def scenario() -> None:
        channel = RequestChannel(4)
        idle = asyncio.create_task(channel.receive_request())
        await asyncio.sleep(0)
        first, second = make_request(1), make_request(2)
        channel.finishing = 1  # a worker is sending a response: the next request is its own
        assert channel.try_send_request(first)
        assert len(channel) == 1 and not idle.done()
        assert channel.try_send_request(second)  # one queued per finishing worker; then the idle one
        assert len(channel) == 1
        assert await idle is second
        channel.finishing = 0
        assert await channel.receive_request() is first
        channel.finishing = 1  # closing while a worker sends a response still wakes every waiting one
        receivers = [asyncio.create_task(channel.receive_request()) for _ in range(2)]
        await asyncio.sleep(0)
        channel.close()
        assert await asyncio.gather(*receivers) == [None, None]
    asyncio.run(scenario())


def test_pipelined_requests_stay_with_one_worker_which_still_lets_the_loop_run():
    """A connection's next request, let through by the previous response, goes to the worker that
    sent that response; after MAX_REQUESTS_WITHOUT_YIELD in a row the worker lets the loop run."""
    total = 3 * MAX_REQUESTS_WITHOUT_YIELD
    requests = [make_request(i) for i in range(total)]
    handled: list[tuple[int, str]] = []
    loop_turns: list[int] = []

    async def scenario() -> None:
        channel = RequestChannel(10)

        class Connection:  # answers in order and lets the next request through, as KafkaChannel does
            def enqueue_response(self, response: Response) -> None:
                following = response.request.header.correlation_id + 1
                if following < total:
                    assert channel.try_send_request(requests[following])

        connection = Connection()
        for request in requests:
            request.processor = connection  # type: ignore[assignment]

        async def handler(request: Request) -> Response:
            task = asyncio.current_task()
            assert task is not None
            handled.append((request.header.correlation_id, task.get_name()))
            return Response.no_op(request)

        def count_turns() -> None:  # a callback that runs once per loop iteration
            loop_turns.append(len(handled))
            if len(handled) < total:
                asyncio.get_running_loop().call_soon(count_turns)

        pool = KafkaRequestHandlerPool(channel, handler, 2)
        pool.start()
        await asyncio.sleep(0)  # both workers wait
        asyncio.get_running_loop().call_soon(count_turns)
        assert channel.try_send_request(requests[0])
        while len(handled) < total:
            await asyncio.sleep(0)
        await pool.shutdown()

    asyncio.run(scenario())
    assert [correlation_id for correlation_id, _ in handled] == list(range(total))
    assert len({worker for _, worker in handled}) == 1
    # The chain took a few loop iterations, not one per request, and never more than the limit in one.
    assert 2 <= len(loop_turns) < total
    assert max(b - a for a, b in zip(loop_turns, loop_turns[1:])) <= MAX_REQUESTS_WITHOUT_YIELD


# --- ApiVersionManager ----------------------------------------------------------------------------

def test_zk_broker_serves_exactly_the_zk_broker_apis():
    manager = ApiVersionManager()
    served = {key for key, _, _ in manager.enabled_apis()}
    assert served == {key for key, spec in API_SPECS.items() if "zkBroker" in spec.listeners}
    assert {ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION} <= served
    assert not {ApiKey.VOTE, ApiKey.BROKER_HEARTBEAT, ApiKey.DESCRIBE_TOPIC_PARTITIONS} & served
    assert manager.version_range(ApiKey.SHARE_FETCH) == (1, 2)  # share groups are served on ZooKeeper too
    assert manager.version_range(ApiKey.PRODUCE) == (0, 11)
    assert manager.version_range(ApiKey.FETCH) == (0, 17)


def test_version_checks_and_the_api_versions_exception():
    manager = ApiVersionManager()
    assert manager.is_api_enabled(ApiKey.METADATA, 12)
    assert not manager.is_api_enabled(ApiKey.METADATA, 13)
    assert not manager.is_api_enabled(ApiKey.VOTE, 0)
    assert not manager.is_api_enabled(999, 0)
    assert manager.is_api_enabled(ApiKey.API_VERSIONS, 127)


def test_unstable_latest_versions_need_the_flag(monkeypatch):
    # No bundled definition has an unstable latest version now; mark one as Kafka would.
    spec = API_SPECS[ApiKey.SHARE_FETCH]
    monkeypatch.setitem(API_SPECS, ApiKey.SHARE_FETCH, dataclasses.replace(spec, latest_version_unstable=True))
    assert ApiVersionManager().version_range(ApiKey.SHARE_FETCH) == (1, 1)
    assert ApiVersionManager(True).version_range(ApiKey.SHARE_FETCH) == (1, 2)


# --- ConnectionQuotas -----------------------------------------------------------------------------

def test_per_ip_limits_and_overrides():
    quotas = ConnectionQuotas(10, 2, {"127.0.0.2": 0, "localhost": 3})
    assert quotas.max_for("127.0.0.1") == 3  # the host name resolved to its address
    assert quotas.try_inc("10.0.0.1") and quotas.try_inc("10.0.0.1")
    assert not quotas.try_inc("10.0.0.1")
    assert not quotas.try_inc("127.0.0.2")
    assert quotas.total == 2 and quotas.count("10.0.0.1") == 2
    quotas.dec("10.0.0.1")
    assert quotas.try_inc("10.0.0.1")


def test_total_limit_wakes_waiters_when_a_connection_closes():
    quotas = ConnectionQuotas(2, 100)
    assert quotas.try_inc("a") and quotas.try_inc("b")
    assert quotas.at_capacity
    resumed: list[int] = []
    quotas.wait_for_capacity(lambda: resumed.append(1))
    quotas.dec("a")
    assert resumed == [1] and not quotas.at_capacity
    quotas.dec("b")
    assert resumed == [1]
    quotas.dec("nobody")  # logged, not counted
    assert quotas.total == 0


def test_unresolvable_override_host_is_a_config_error():
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        ConnectionQuotas(1, 1, {"no-such-host.invalid": 1})


def test_ipv4_mapped_addresses_are_normalized():
    assert normalize_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_ip("::1") == "::1"
    assert normalize_ip("10.1.2.3") == "10.1.2.3"


# --- MemoryPool / connection creation rate ----------------------------------------------------------

def test_memory_pool_goes_below_zero_once_and_wakes_waiters_when_bytes_return():
    from broker.network.memory_pool import MemoryPool

    pool = MemoryPool(100)
    woken: list[int] = []
    pool.allocate(60)
    assert not pool.is_out_of_memory
    pool.allocate(60)  # read while bytes were left: the pool may go negative, as Kafka's non-strict pool
    assert pool.is_out_of_memory and pool.available == -20
    pool.wait_for_memory(lambda: woken.append(1))
    pool.release(10)
    assert woken == []  # still none left
    pool.release(50)
    assert woken == [1] and pool.available == 40


def test_connection_creation_rate_paces_like_kafka():
    """The pacing a real Kafka 3.9 broker showed with max.connection.creation.rate=2 and the default
    quota windows (11 of 1 s): a burst of 20, then about one connection a second."""
    quotas = ConnectionQuotas(10**6, 10**6, None, max_connection_creation_rate=2)
    now, admitted = 0.0, []
    for _ in range(26):
        now += quotas.record_connection_creation(now=now)
        admitted.append(now)
        now += 0.005
    assert admitted[19] < 0.2 and 0.3 < admitted[20] < 0.6
    gaps = [later - earlier for earlier, later in zip(admitted[21:], admitted[22:])]
    assert all(0.9 < gap < 1.1 for gap in gaps)
    assert quotas.record_connection_creation(protected=True, now=now) == 0.0  # the inter-broker listener


def test_an_ip_over_its_connection_creation_rate_is_refused_and_not_counted():
    """KIP-612: with connection_creation_rate 2 for an IP (three 1 s windows) its first four
    connections are admitted, the fifth is held for the throttle time and counted neither for the
    IP nor broker-wide; other IPs follow the <default> (unlimited until set)."""
    quotas = ConnectionQuotas(10**6, 10**6, None, max_connection_creation_rate=1000,
                              quota_window_num=3, quota_window_size_s=1)
    quotas.update_ip_connection_rate("10.0.0.1", 2)
    now = 100.0
    assert [quotas.record_ip_connection("10.0.0.1", now=now) for _ in range(4)] == [0.0] * 4
    held = quotas.record_ip_connection("10.0.0.1", now=now)
    assert 0 < held <= 1.0  # (2.5 - 2) / 2 * 2 s, at most one window
    assert quotas.record_ip_connection("10.0.0.1", now=now) == held  # the held one was not counted
    assert quotas.record_ip_connection("10.0.0.2", now=now) == 0.0
    quotas.update_ip_connection_rate(None, 0)  # <default>: nobody without an override may connect
    assert quotas.record_ip_connection("10.0.0.2", now=now) == 1.0
    quotas.update_ip_connection_rate("10.0.0.1", None)  # the override removed: the default applies
    assert quotas.connection_rate_for_ip("10.0.0.1") == 0


def test_queued_max_request_bytes_must_hold_a_whole_request():
    from broker.config import KafkaConfig

    base = {"zookeeper.connect": "zk:2181", "socket.request.max.bytes": "1000"}
    with pytest.raises(ConfigError, match="queued.max.request.bytes"):
        KafkaConfig({**base, "queued.max.request.bytes": "999"})
    assert KafkaConfig({**base, "queued.max.request.bytes": "1000"}).queued_max_request_bytes == 1000
    assert KafkaConfig({**base, "queued.max.request.bytes": "-1"}).queued_max_request_bytes == -1
