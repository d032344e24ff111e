"""SocketServer with real sockets: ordering, limits, malformed input, idle expiry, write coalescing."""
from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading

import pytest

from broker.network.request_channel import Request, Response, ResponseAction
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.framing import decode_response, encode_request
from protocol.messages import ApiVersionsResponse, MetadataRequest, MetadataResponse
from tests.harness.waiting import wait_for

from network_harness import (
    api_versions_request,
    echo_api_versions,
    echo_once_released,
    is_closed_by_server,
    raw_frame,
    recv_api_versions,
    recv_frame,
)

pytestmark = pytest.mark.integration


def test_pipelined_requests_keep_order_per_connection_while_connections_interleave(network_server):
    in_flight: dict[str, int] = {}
    overlaps: list[str] = []

    async def handle(request: Request) -> Response:
        if in_flight.get(request.connection_id):
            overlaps.append(request.connection_id)
        in_flight[request.connection_id] = 1
        await asyncio.sleep(random.random() / 500)  # completions interleave across connections
        in_flight[request.connection_id] = 0
        return await echo_api_versions(request)

    server = network_server(handle)
    clients = [server.connect(), server.connect()]
    n = 60
    for round_start in range(0, n, 10):
        for sock in clients:  # both connections pipeline ten requests at a time
            sock.sendall(b"".join(api_versions_request(i) for i in range(round_start, round_start + 10)))
    for sock in clients:
        assert [recv_api_versions(sock)[0] for _ in range(n)] == list(range(n))
    assert overlaps == []
    assert server.stats()["requests"] == 2 * n


def test_oversized_request_closes_only_that_connection(network_server):
    server = network_server(echo_api_versions, socket_request_max_bytes=1000)
    good, bad = server.connect(), server.connect()
    good.sendall(api_versions_request(1))
    assert recv_api_versions(good)[0] == 1
    bad.sendall(struct.pack(">i", 1001) + b"x" * 100)
    assert is_closed_by_server(bad)
    good.sendall(api_versions_request(2))
    assert recv_api_versions(good)[0] == 2


def test_request_that_fits_the_limit_exactly_is_served(network_server):
    server = network_server(echo_api_versions, socket_request_max_bytes=300)
    frame = next(f for f in (api_versions_request(7, name="n" * n) for n in range(300)) if len(f) - 4 == 300)
    sock = server.connect()
    sock.sendall(frame)
    assert recv_api_versions(sock)[0] == 7


@pytest.mark.parametrize("payload", [
    b"\x00\x12",                                      # too short for a header
    struct.pack(">hhih", 999, 0, 1, -1),              # unknown api key
    struct.pack(">hhih", ApiKey.METADATA, 99, 1, -1),  # unsupported version
    struct.pack(">hhih", ApiKey.VOTE, 0, 1, -1),      # a KRaft-controller API a ZK broker does not serve
    struct.pack(">hhih", ApiKey.METADATA, 1, 1, 50),  # client id longer than the frame
    b"",                                              # empty frame
], ids=["short", "unknown-key", "unsupported-version", "kraft-only", "bad-client-id", "empty"])
def test_unparseable_or_unsupported_header_closes_the_connection(network_server, payload):
    server = network_server(echo_api_versions)
    bystander = server.connect()
    sock = server.connect()
    sock.sendall(raw_frame(payload))
    assert is_closed_by_server(sock)
    bystander.sendall(api_versions_request(3))
    assert recv_api_versions(bystander)[0] == 3


def test_negative_size_closes_the_connection(network_server):
    server = network_server(echo_api_versions)
    sock = server.connect()
    sock.sendall(struct.pack(">i", -5))
    assert is_closed_by_server(sock)


def test_api_versions_at_an_unknown_version_reaches_the_handler(network_server):
    async def handle(request: Request) -> Response:
        lo, hi = server.server.api_versions.version_range(ApiKey.API_VERSIONS)
        assert request.api_version > hi
        body = ApiVersionsResponse(error_code=Errors.UNSUPPORTED_VERSION,
                                   api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=lo, max_version=hi)])
        return Response.send(request, body, version=0)

    server = network_server(handle)
    sock = server.connect()
    # A future ApiVersions version: header v2 (flexible rule), body the server cannot know.
    sock.sendall(raw_frame(struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 42, 1) + b"c" + b"\x00" + b"\x07junk"))
    correlation_id, body = recv_api_versions(sock, version=0)
    assert correlation_id == 42
    assert body.error_code == Errors.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


def test_half_frame_then_stall_is_closed_by_idle_timeout(network_server):
    server = network_server(echo_api_versions, connections_max_idle_ms=200)
    sock = server.connect()
    sock.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x03")
    assert is_closed_by_server(sock)
    assert server.stats()["connections"] == 0


def test_idle_timeout_spares_connections_with_a_request_in_flight(network_server):
    release = threading.Event()

    async def handle(request: Request) -> Response:
        while not release.is_set():  # a long-running request, longer than the idle timeout
            await asyncio.sleep(0.01)
        return await echo_api_versions(request)

    server = network_server(handle, connections_max_idle_ms=500)
    busy, idle = server.connect(), server.connect()
    busy.sendall(api_versions_request(5))
    assert is_closed_by_server(idle)  # one idle period has certainly passed
    release.set()
    assert recv_api_versions(busy)[0] == 5


def test_max_connections_per_ip_rejects_extra_connections(network_server):
    server = network_server(echo_api_versions, max_connections_per_ip=2)
    first, second, third = server.connect(), server.connect(), server.connect()
    assert is_closed_by_server(third)
    for i, sock in enumerate((first, second)):
        sock.sendall(api_versions_request(i))
        assert recv_api_versions(sock)[0] == i
    first.close()
    while server.stats()["connections"] != 1:  # the server notices the close on its own loop
        pass
    fourth = server.connect()
    fourth.sendall(api_versions_request(9))
    assert recv_api_versions(fourth)[0] == 9


def test_max_connections_per_ip_override_wins(network_server):
    server = network_server(echo_api_versions, max_connections_per_ip=0,
                            **{"max_connections_per_ip_overrides": "127.0.0.1:1"})
    allowed = server.connect()
    allowed.sendall(api_versions_request(1))
    assert recv_api_versions(allowed)[0] == 1
    assert is_closed_by_server(server.connect())


def test_max_connections_makes_new_clients_wait_for_a_free_slot(network_server):
    server = network_server(echo_api_versions, max_connections=2)
    first, second = server.connect(), server.connect()
    for i, sock in enumerate((first, second)):
        sock.sendall(api_versions_request(i))
        assert recv_api_versions(sock)[0] == i
    waiting = server.connect()  # completes in the kernel's listen backlog
    waiting.sendall(api_versions_request(7))
    assert server.stats()["connections"] == 2
    first.close()
    assert recv_api_versions(waiting)[0] == 7


def test_thousand_idle_connections_do_not_stop_an_active_client(network_server):
    # A client opening connections in a tight loop outpaces any acceptor; with Kafka's default
    # backlog of 50 the kernel would drop SYNs and the test would wait for retransmits.
    server = network_server(echo_api_versions, socket_listen_backlog_size=1100)
    idle = [server.connect() for _ in range(1000)]
    try:
        active = server.connect()
        for i in range(50):
            active.sendall(api_versions_request(i))
            assert recv_api_versions(active)[0] == i
        assert server.stats()["connections"] == 1001
    finally:
        for sock in idle:
            sock.close()


def test_pipelined_responses_are_coalesced_into_few_writes(network_server):
    server = network_server(echo_api_versions)
    sock = server.connect()
    sock.sendall(api_versions_request(0))  # warm up: connection accepted, handlers idle
    recv_api_versions(sock)
    before = server.stats()["writes"]
    sock.sendall(b"".join(api_versions_request(i) for i in range(1, 21)))
    assert [recv_api_versions(sock)[0] for _ in range(20)] == list(range(1, 21))
    writes = server.stats()["writes"] - before
    assert 1 <= writes < 20


def test_a_chain_of_large_pipelined_responses_is_written_as_it_grows(network_server):
    """Pipelined requests are handled one after the other by one worker without a loop turn in
    between; their responses still go out once FLUSH_THRESHOLD_BYTES are queued, not all at the end."""
    size = 200 * 1024
    writes_seen: list[int] = []

    async def handle(request: Request) -> Response:  # answers at once: the chain does not yield
        writes_seen.append(server.server.writes)
        correlation_id = request.header.correlation_id
        frame = struct.pack(">ii", 4 + size, correlation_id) + bytes([correlation_id]) * size
        return Response(request, ResponseAction.SEND, [frame])

    server = network_server(handle)
    sock = server.connect()
    sock.sendall(api_versions_request(0))
    assert len(recv_frame(sock)) == 4 + size
    sock.sendall(b"".join(api_versions_request(i) for i in range(1, 7)))
    for i in range(1, 7):
        frame = recv_frame(sock)
        assert struct.unpack_from(">i", frame)[0] == i and frame[4:] == bytes([i]) * size
    assert len(writes_seen) == 7
    assert writes_seen[-1] > writes_seen[1]  # written during the chain, before its last request


def test_large_request_spanning_many_reads_is_delivered_whole(network_server):
    server = network_server(echo_api_versions)
    sock = server.connect()
    name = "x" * 300_000
    frame = api_versions_request(11, name=name)
    sock.sendall(api_versions_request(10) + frame + api_versions_request(12))
    results = [recv_api_versions(sock) for _ in range(3)]
    assert [cid for cid, _ in results] == [10, 11, 12]
    header_size = 2 + 2 + 4 + 2 + len("client") + 1  # request header v2
    assert results[1][1].throttle_time_ms == len(frame) - 4 - header_size


def test_no_response_request_unmutes_the_connection(network_server):
    async def handle(request: Request) -> Response:
        if request.body().client_software_name == "acks0":
            return Response.no_op(request)
        return await echo_api_versions(request)

    server = network_server(handle)
    sock = server.connect()
    sock.sendall(api_versions_request(1, name="acks0") + api_versions_request(2))
    assert recv_api_versions(sock)[0] == 2


def test_requests_sent_before_the_client_hangs_up_are_all_handled(network_server):
    """An acks=0 producer may send and close at once: Kafka still handles what arrived."""
    handled: list[int] = []

    async def handle(request: Request) -> Response:
        await asyncio.sleep(0.01)  # slow enough that most requests are still queued at EOF
        handled.append(request.header.correlation_id)
        return Response.no_op(request)

    server = network_server(handle)
    sock = server.connect()
    sock.sendall(b"".join(api_versions_request(i) for i in range(20)))
    sock.close()
    wait_for(lambda: len(handled) == 20, "every request handled")
    assert handled == list(range(20))


def test_handler_close_response_and_failure_close_only_that_connection(network_server):
    async def handle(request: Request) -> Response:
        name = request.body().client_software_name
        if name == "close":
            return Response.close(request)
        if name == "boom":
            raise RuntimeError("handler bug")
        return await echo_api_versions(request)

    server = network_server(handle)
    bystander = server.connect()
    for name in ("close", "boom"):
        sock = server.connect()
        sock.sendall(api_versions_request(1, name=name))
        assert is_closed_by_server(sock)
    bystander.sendall(api_versions_request(2))
    assert recv_api_versions(bystander)[0] == 2


def test_unparseable_body_closes_the_connection(network_server):
    async def handle(request: Request) -> Response:
        request.body()
        return await echo_api_versions(request)

    server = network_server(handle)
    sock = server.connect()
    header = struct.pack(">hhih", ApiKey.METADATA, 1, 1, -1)
    sock.sendall(raw_frame(header + b"\x00\x00\x00\x05"))  # 5 topics announced, none present
    assert is_closed_by_server(sock)


def test_full_request_channel_pauses_reading_until_space_frees(network_server):
    release = threading.Event()
    handle = echo_once_released(release)
    server = network_server(handle, queued_max_requests=1, num_io_threads=1)
    clients = [server.connect() for _ in range(4)]
    for i, sock in enumerate(clients):
        sock.sendall(api_versions_request(i))
    while server.stats()["requests"] < 2:  # one with the (stuck) handler + one queued
        pass
    stats = server.stats()
    assert (stats["requests"], stats["queued"]) == (2, 1)  # the other two wait outside the channel
    release.set()
    for i, sock in enumerate(clients):
        assert recv_api_versions(sock)[0] == i
    assert server.stats()["requests"] == 4


def test_metadata_request_round_trip_with_generated_codec(network_server):
    async def handle(request: Request) -> Response:
        body = request.body()
        topics = [MetadataResponse.MetadataResponseTopic(name=t.name, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION)
                  for t in body.topics]
        return Response.send(request, MetadataResponse(controller_id=0, topics=topics))

    server = network_server(handle)
    sock = server.connect()
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t1")])
    sock.sendall(encode_request(request, ApiKey.METADATA, 12, 77, "c"))
    correlation_id, response = decode_response(ApiKey.METADATA, 12, recv_frame(sock))
    assert correlation_id == 77
    assert [(t.name, t.error_code) for t in response.topics] == [("t1", Errors.UNKNOWN_TOPIC_OR_PARTITION)]


def test_server_shutdown_closes_client_connections(network_server):
    server = network_server(echo_api_versions)
    sock = server.connect()
    sock.sendall(api_versions_request(1))
    recv_api_versions(sock)
    server.stop()
    assert is_closed_by_server(sock)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).recv(1)


def test_frames_trickled_byte_by_byte_are_reassembled(network_server):
    server = network_server(echo_api_versions)
    sock = server.connect()
    for byte in api_versions_request(1) + api_versions_request(2):
        sock.send(bytes([byte]))
    assert [recv_api_versions(sock)[0] for _ in range(2)] == [1, 2]


def test_parked_request_frees_its_worker_and_is_answered_later(network_server):
    other_served = asyncio.Event()

    async def handle(request: Request) -> Response | None:
        if request.body().client_software_name == "park":
            async def answer_later() -> None:  # what a purgatory completion does
                await other_served.wait()
                server.server.request_channel.send_response(await echo_api_versions(request))
            asyncio.get_running_loop().create_task(answer_later())
            return None
        other_served.set()
        return await echo_api_versions(request)

    server = network_server(handle, num_io_threads=1)
    parked, other = server.connect(), server.connect()
    parked.sendall(api_versions_request(1, name="park") + api_versions_request(2))
    while server.stats()["requests"] < 1:
        pass
    other.sendall(api_versions_request(3))  # served by the only worker while the first request waits
    assert recv_api_versions(other)[0] == 3
    assert [recv_api_versions(parked)[0] for _ in range(2)] == [1, 2]


def test_queued_max_request_bytes_stops_reading_until_requests_free_their_bytes(network_server):
    release = threading.Event()
    handle = echo_once_released(release)
    server = network_server(handle, queued_max_request_bytes=200, socket_request_max_bytes=200)
    clients = [server.connect() for _ in range(3)]
    for i, sock in enumerate(clients):
        sock.sendall(api_versions_request(i, name="n" * 150))  # ~170 bytes: the second one exhausts the pool

    def muted_for_memory() -> int:
        return sum(c._waiting_for_memory for p in server.server.processors for c in p.connections.values())

    wait_for(lambda: server.call(muted_for_memory).result(5), "the third request left unread", 20)
    assert server.stats()["requests"] == 2
    assert server.call(lambda: server.server.memory_pool.available).result(5) < 0
    release.set()
    for i, sock in enumerate(clients):
        assert recv_api_versions(sock)[0] == i
    assert server.stats()["requests"] == 3
    assert server.call(lambda: server.server.memory_pool.available).result(5) == 200  # every byte given back


def test_max_connection_creation_rate_holds_new_connections(network_server):
    # A rate of 0 holds every new connection for one quota window, as Kafka's acceptor does.
    server = network_server(echo_api_versions, max_connection_creation_rate=0, quota_window_size_seconds=3)
    held = server.connect()  # the kernel completes it; the acceptor holds it
    held.sendall(api_versions_request(4))
    assert server.stats()["connections"] == 0
    assert recv_api_versions(held)[0] == 4  # admitted once the window has passed


def test_parked_produces_let_the_next_requests_through_and_answers_keep_their_order(network_server):
    from broker.network.kafka_channel import MAX_PENDING_REQUESTS
    from protocol.messages import ProduceRequest, ProduceResponse

    dispatched: list[int] = []
    parked: list[Request] = []

    async def handle(request: Request) -> Response | None:
        dispatched.append(request.header.correlation_id)
        if request.header.api_key != ApiKey.PRODUCE:
            answer = await echo_api_versions(request)
            if len(parked) == 3:  # answer the parked produces last first: the client still sees 1, 2, 3, 4
                for held in reversed(parked):
                    server.server.request_channel.send_response(Response.send(held, ProduceResponse(responses=[])))
            return answer
        parked.append(request)
        request.processor.request_parked(request)  # what the produce handler does once appended (acks=all)
        return None

    server = network_server(handle)
    sock = server.connect()
    produce = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[])
    sock.sendall(b"".join(encode_request(produce, ApiKey.PRODUCE, 9, i, "test") for i in (1, 2, 3))
                 + api_versions_request(4))
    answers = [decode_response(ApiKey.PRODUCE, 9, recv_frame(sock))[0] for _ in range(3)]
    assert answers == [1, 2, 3] and recv_api_versions(sock)[0] == 4
    assert dispatched == [1, 2, 3, 4]  # the ApiVersions was handled while the three produces waited

    # At most MAX_PENDING_REQUESTS unanswered: the next produce waits until one is answered.
    parked.clear()
    dispatched.clear()
    count = MAX_PENDING_REQUESTS + 2
    sock.sendall(b"".join(encode_request(produce, ApiKey.PRODUCE, 9, 10 + i, "test") for i in range(count)))
    wait_for(lambda: len(dispatched) == MAX_PENDING_REQUESTS, timeout=10)
    server.call(lambda: server.server.request_channel.send_response(
        Response.send(parked[0], ProduceResponse(responses=[])))).result(10)
    wait_for(lambda: len(dispatched) == MAX_PENDING_REQUESTS + 1, timeout=10)
    assert dispatched == list(range(10, 10 + MAX_PENDING_REQUESTS + 1))
    assert decode_response(ApiKey.PRODUCE, 9, recv_frame(sock))[0] == 10
