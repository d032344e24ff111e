"""Responses with file slices (sendfile and its fallback), and real Kafka clients against the server."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import broker.network.transport_layer as transport_layer
from broker.network.request_channel import Request, Response
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.framing import decode_response, encode_request
from protocol.messages import (
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataResponse,
)

from network_harness import recv_frame

pytestmark = pytest.mark.integration

FETCH_VERSION = 12


class FileSlice:
    """A FileRecords-like window of a file: what storage hands the network layer."""

    def __init__(self, path: Path, position: int, length: int) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self.position = position
        self._length = length

    def __len__(self) -> int:
        return self._length

    def fileno(self) -> int:
        return self._fd

    def read_bytes(self) -> bytes:
        return os.pread(self._fd, self._length, self.position)

    def close(self) -> None:
        os.close(self._fd)


class BytesOnlySource:
    """A records source without a file descriptor: must fall back to read_bytes()."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def read_bytes(self) -> bytes:
        return self._data


def fetch_handler(make_records):
    async def handle(request: Request) -> Response:
        body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
            topic="t", partitions=[FetchResponse.PartitionData(partition_index=p, records=make_records(p))
                                   for p in range(2)])])
        return Response.send(request, body)
    return handle


def fetch(sock, correlation_id: int) -> FetchResponse:
    request = FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchPartition(partition=0)])])
    sock.sendall(encode_request(request, ApiKey.FETCH, FETCH_VERSION, correlation_id, "c"))
    cid, response = decode_response(ApiKey.FETCH, FETCH_VERSION, recv_frame(sock))
    assert cid == correlation_id
    return response  # type: ignore[return-value]


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, bytes]:
    data = os.urandom(3 * 1024 * 1024 + 17)  # bigger than a socket buffer: sendfile goes partial
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path, data


@pytest.fixture
def slice_server(network_server, data_file):
    """``serve({partition: (position, length)})``: a server answering each fetch with such FileSlices
    of the data file (closed at the end of the test)."""
    path, _ = data_file
    opened: list[FileSlice] = []

    def serve(slices: dict[int, tuple[int, int]]):
        def make_records(partition: int) -> FileSlice:
            opened.append(FileSlice(path, *slices[partition]))
            return opened[-1]
        return network_server(fetch_handler(make_records))
    yield serve
    for source in opened:
        source.close()


def test_file_slices_are_sent_with_sendfile(slice_server, data_file, monkeypatch):
    _, data = data_file
    calls = []
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        calls.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(transport_layer.os, "sendfile", counting_sendfile)
    slices = {0: (10, 2 * 1024 * 1024), 1: (5, 1000)}
    sock = slice_server(slices).connect()
    for correlation_id in (1, 2):
        response = fetch(sock, correlation_id)
        for partition in response.responses[0].partitions:
            position, length = slices[partition.partition_index]
            assert bytes(partition.records) == data[position:position + length]
    assert len(calls) >= 4


def test_small_file_slices_go_out_with_the_frame_not_by_sendfile(slice_server, data_file, monkeypatch):
    """A fetch of a few batches (a follower's, a caught-up consumer's) is one write, not three."""
    _, data = data_file
    sendfiles, sendmsgs = [], []
    real_sendfile, real_send_buffers = os.sendfile, transport_layer.PlaintextTransportLayer.send_buffers
    monkeypatch.setattr(transport_layer.os, "sendfile", lambda *args: sendfiles.append(args) or real_sendfile(*args))

    def counting_send_buffers(self, buffers):
        sendmsgs.append(len(buffers))
        return real_send_buffers(self, buffers)
    monkeypatch.setattr(transport_layer.PlaintextTransportLayer, "send_buffers", counting_send_buffers)
    slices = {0: (7, 300), 1: (4_000, 16 * 1024)}  # both at most SMALL_FILE_SLICE_BYTES
    response = fetch(slice_server(slices).connect(), 3)
    assert [bytes(p.records) for p in response.responses[0].partitions] == \
        [data[position:position + length] for position, length in slices.values()]
    assert sendfiles == [] and len(sendmsgs) == 1


def test_storage_file_records_slice_is_sent_zero_copy(network_server, data_file):
    file_records = pytest.importorskip("storage.file_records", reason="storage.file_records not available")
    path, data = data_file
    records = file_records.FileRecords.open(str(path), read_only=True)
    try:
        server = network_server(fetch_handler(lambda p: records.slice(100 + p, 50_000)))
        response = fetch(server.connect(), 9)
        assert [bytes(p.records) for p in response.responses[0].partitions] == [data[100:50_100], data[101:50_101]]
    finally:
        records.close()


def test_records_source_without_a_file_falls_back_to_its_bytes(network_server):
    payload = {0: b"a" * 70_000, 1: b"b" * 3}
    server = network_server(fetch_handler(lambda p: BytesOnlySource(payload[p])))
    response = fetch(server.connect(), 5)
    assert [bytes(p.records) for p in response.responses[0].partitions] == [payload[0], payload[1]]


def test_sendfile_refused_by_the_kernel_falls_back_to_reading(network_server, data_file, monkeypatch):
    path, data = data_file

    def unsupported(*_args: int) -> int:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(transport_layer.os, "sendfile", unsupported)
    source = FileSlice(path, 0, 4096)
    try:
        server = network_server(fetch_handler(lambda p: source))
        response = fetch(server.connect(), 3)
        assert [bytes(p.records) for p in response.responses[0].partitions] == [data[:4096]] * 2
    finally:
        source.close()


# --- real clients ---------------------------------------------------------------------------------

def bootstrap_handler(server_ref):
    """ApiVersions and Metadata, enough for kafka-python to bootstrap and identify the broker."""
    async def handle(request: Request) -> Response:
        api_versions = server_ref[0].server.api_versions
        if request.api_key == ApiKey.API_VERSIONS:
            lo, hi = api_versions.version_range(ApiKey.API_VERSIONS)
            if request.api_version > hi:
                return Response.send(request, ApiVersionsResponse(
                    error_code=Errors.UNSUPPORTED_VERSION,
                    api_keys=[ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=lo, max_version=hi)]),
                    version=0)
            return Response.send(request, ApiVersionsResponse(api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
                for key, lo, hi in api_versions.enabled_apis()]))
        if request.api_key == ApiKey.METADATA:
            broker = MetadataResponse.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=server_ref[0].port)
            return Response.send(request, MetadataResponse(brokers=[broker], cluster_id="test-cluster", controller_id=0))
        return Response.close(request)
    return handle


def test_kafka_python_identifies_the_broker_through_api_versions(network_server):
    compat = pytest.importorskip("kafka.net.compat", reason="kafka-python 3.x (KafkaNetClient) not installed")
    server_ref: list = []
    server = network_server(bootstrap_handler(server_ref))
    server_ref.append(server)
    client = compat.KafkaNetClient(bootstrap_servers=f"127.0.0.1:{server.port}", request_timeout_ms=10_000)
    try:
        assert client.check_version(timeout_ms=10_000) == (3, 9)
        assert [b.node_id for b in client.cluster.brokers()] == [0]
    finally:
        client.close()


def test_librdkafka_bootstraps_against_the_server(network_server):
    admin_module = pytest.importorskip("confluent_kafka.admin", reason="confluent-kafka not installed")
    server_ref: list = []
    server = network_server(bootstrap_handler(server_ref))
    server_ref.append(server)
    admin = admin_module.AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}",
                                      "broker.address.family": "v4"})
    metadata = admin.list_topics(timeout=15)
    assert metadata.cluster_id == "test-cluster"
    assert metadata.controller_id == 0
    assert list(metadata.brokers) == [0]
