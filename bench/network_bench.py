"""Network layer throughput: requests/s through SocketServer with a do-nothing handler.

The server runs in its own process (uvloop), with a handler that answers at once, so the
numbers are the cost of the network layer itself: framing, header parsing, the request
channel, the handler pool and response writes. Client processes pipeline ``--depth``
requests per connection. ``--mode fetch`` answers each request with a file slice of
``--fetch-bytes`` (the sendfile path); ``--mode api-versions`` with a small response.

    python bench/network_bench.py --mode api-versions --clients 4 --connections 8 --depth 16
    python bench/network_bench.py --mode fetch --fetch-bytes 1048576 --clients 2 --connections 2 --depth 2
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.api_keys import ApiKey  # noqa: E402
from protocol.framing import encode_request  # noqa: E402
from protocol.messages import ApiVersionsRequest  # noqa: E402


class _FileSlice:
    def __init__(self, fd: int, length: int) -> None:
        self._fd, self._length, self.position = fd, length, 0

    def __len__(self) -> int:
        return self._length

    def fileno(self) -> int:
        return self._fd

    def read_bytes(self) -> bytes:
        return os.pread(self._fd, self._length, 0)


def _serve(port_queue: mp.Queue, mode: str, fetch_bytes: int, network_threads: int, io_threads: int,
           stop: mp.Event) -> None:
    import uvloop

    from broker.config import KafkaConfig
    from broker.network.request_channel import Request, Response
    from broker.network.request_handler import KafkaRequestHandlerPool
    from broker.network.socket_server import SocketServer
    from protocol.messages import ApiVersionsResponse, FetchResponse

    with tempfile.TemporaryFile() as data:
        data.write(os.urandom(fetch_bytes))
        data.flush()
        records = _FileSlice(data.fileno(), fetch_bytes)

        async def handle(request: Request) -> Response:
            if mode == "fetch":
                body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
                    topic="t", partitions=[FetchResponse.PartitionData(records=records)])])
                return Response.send(request, body, version=12)
            return Response.send(request, ApiVersionsResponse())

        async def main() -> None:
            config = KafkaConfig({"zookeeper.connect": "unused:2181", "listeners": "PLAINTEXT://127.0.0.1:0",
                                  "num.network.threads": network_threads, "num.io.threads": io_threads,
                                  "socket.listen.backlog.size": 1024})
            server = SocketServer(config)
            pool = KafkaRequestHandlerPool(server.request_channel, handle, config.num_io_threads)
            await server.start()
            pool.start()
            port_queue.put(server.bound_port("PLAINTEXT"))
            while not stop.is_set():
                await asyncio.sleep(0.05)
            port_queue.put({"writes": server.writes, "requests": server.requests_received,
                            "bytes_sent": server.bytes_sent})
            server.shutdown()
            await pool.shutdown()

        uvloop.run(main())


def _recv_frame(sock: socket.socket) -> int:
    header = sock.recv(4, socket.MSG_WAITALL)
    (size,) = struct.unpack(">i", header)
    remaining = size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError("server closed the connection")
        remaining -= len(chunk)
    return size


def _client(port: int, connections: int, depth: int, seconds: float, result: mp.Queue) -> None:
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    request = encode_request(ApiVersionsRequest(client_software_name="bench", client_software_version="1"),
                             ApiKey.API_VERSIONS, 3, 1, "bench")
    batch = request * depth
    done = received = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for sock in socks:
            sock.sendall(batch)
        for sock in socks:
            for _ in range(depth):
                received += _recv_frame(sock)
        done += depth * connections
    for sock in socks:
        sock.close()
    result.put((done, received))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("api-versions", "fetch"), default="api-versions")
    parser.add_argument("--fetch-bytes", type=int, default=1 << 20)
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--connections", type=int, default=8, help="connections per client process")
    parser.add_argument("--depth", type=int, default=16, help="pipelined requests per connection")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--network-threads", type=int, default=3)
    parser.add_argument("--io-threads", type=int, default=8)
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    port_queue, results, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(port_queue, args.mode, args.fetch_bytes if args.mode == "fetch" else 0,
                                              args.network_threads, args.io_threads, stop))
    server.start()
    try:
        port = port_queue.get(timeout=30)
        clients = [ctx.Process(target=_client, args=(port, args.connections, args.depth, args.seconds, results))
                   for _ in range(args.clients)]
        started = time.monotonic()
        for client in clients:
            client.start()
        totals = [results.get(timeout=args.seconds + 60) for _ in clients]
        elapsed = time.monotonic() - started
        for client in clients:
            client.join()
        stop.set()
        stats = port_queue.get(timeout=30)
    finally:
        stop.set()
        server.join(timeout=30)
        if server.is_alive():
            server.kill()
    requests = sum(t[0] for t in totals)
    received = sum(t[1] for t in totals)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"mode={args.mode} clients={args.clients} connections/client={args.connections} depth={args.depth}")
    print(f"requests: {requests} in {elapsed:.2f}s = {requests / elapsed:,.0f} req/s; "
          f"responses {received / elapsed / 1e6:,.1f} MB/s")
    print(f"server: {stats['requests']} requests, {stats['writes']} write syscalls "
          f"({stats['requests'] / max(stats['writes'], 1):.1f} responses per write)")


if __name__ == "__main__":
    main()
