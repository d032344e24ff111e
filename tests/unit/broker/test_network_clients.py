"""NetworkClients: many coroutines sending at once, each gets its own answer."""
from __future__ import annotations

import asyncio

from broker.network.network_client import NetworkClients
from protocol.api_keys import ApiKey
from protocol.framing import decode_request, encode_response
from protocol.messages import ListOffsetsRequest, ListOffsetsResponse

VERSION = 7


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers each ListOffsets with the requested topic's name, after a pause that lets other
    exchanges start meanwhile."""
    try:
        while True:
            size = int.from_bytes(await reader.readexactly(4), "big")
            header, body = decode_request(await reader.readexactly(size))
            await asyncio.sleep(0.01)
            answer = ListOffsetsResponse(topics=[ListOffsetsResponse.ListOffsetsTopicResponse(
                name=body.topics[0].name, partitions=[])])
            writer.write(encode_response(answer, header.api_key, header.api_version, header.correlation_id))
    except asyncio.IncompleteReadError:
        writer.close()


def _request(name: str) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[])])


def test_concurrent_sends_to_several_destinations_each_get_their_answer() -> None:
    """Twenty coroutines over two servers: with one shared NetworkClient they raised RuntimeError
    (two readers on one stream) or lost their connection to a send elsewhere."""
    async def run() -> None:
        servers = [await asyncio.start_server(_serve, "127.0.0.1", 0) for _ in range(2)]
        endpoints = [("127.0.0.1", server.sockets[0].getsockname()[1]) for server in servers]
        clients = NetworkClients("test", timeout_s=10)
        try:
            answers = await asyncio.gather(*(
                clients.send(endpoints[i % 2], endpoints[i % 2], _request(f"topic-{i}"), ApiKey.LIST_OFFSETS,
                             VERSION) for i in range(20)))
            assert [a.topics[0].name for a in answers] == [f"topic-{i}" for i in range(20)]
        finally:
            clients.close()
            for server in servers:
                server.close()

    asyncio.run(run())
