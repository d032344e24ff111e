"""A TCP endpoint that accepts the controller's LeaderAndIsr, UpdateMetadata and StopReplica
requests over the Kafka protocol, records them and answers success, standing in for a broker's
request handling until the broker exists. Registration in ZooKeeper stays the real one."""
from __future__ import annotations

import socket
import struct
import threading
from typing import Any

from tests.harness.ports import free_port

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
KAFKA_STORAGE_ERROR = 56


class ControllerRequestSink:
    """`storage_errors` lists (topic, partition) answered KAFKA_STORAGE_ERROR in LeaderAndIsr, as a
    broker does for replicas on a failed log dir."""

    def __init__(self) -> None:
        self.storage_errors: set[tuple[str, int]] = set()
        self.host = "127.0.0.1"
        self.port = free_port()
        self.requests: list[tuple[int, Any]] = []
        self._lock = threading.Lock()
        self._server = socket.create_server((self.host, self.port))
        self._server.settimeout(0.2)
        self._stopped = threading.Event()
        self._threads = [threading.Thread(target=self._accept_loop, daemon=True)]
        self._threads[0].start()

    def received(self, api_key: int) -> list[Any]:
        with self._lock:
            return [request for key, request in self.requests if key == api_key]

    def close(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(5)
        self._server.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        from protocol.framing import decode_request, encode_response

        conn.settimeout(0.2)
        with conn:
            buffer = bytearray()
            while not self._stopped.is_set():
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                while len(buffer) >= 4:
                    (size,) = struct.unpack(">i", buffer[:4])
                    if len(buffer) < 4 + size:
                        break
                    frame, buffer = bytes(buffer[4 : 4 + size]), buffer[4 + size :]
                    header, request = decode_request(frame)
                    with self._lock:
                        self.requests.append((header.api_key, request))
                    response = self._response(header.api_key, request)
                    conn.sendall(encode_response(response, header.api_key, header.api_version, header.correlation_id))

    def _response(self, api_key: int, request: Any) -> Any:
        from protocol.messages import LeaderAndIsrResponse, StopReplicaResponse, UpdateMetadataResponse

        if api_key == LEADER_AND_ISR:
            return LeaderAndIsrResponse(
                error_code=0,
                topics=[
                    LeaderAndIsrResponse.LeaderAndIsrTopicError(
                        topic_id=topic.topic_id,
                        partition_errors=[
                            LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                                partition_index=p.partition_index,
                                error_code=KAFKA_STORAGE_ERROR
                                if (topic.topic_name, p.partition_index) in self.storage_errors
                                else 0,
                            )
                            for p in topic.partition_states
                        ],
                    )
                    for topic in request.topic_states
                ],
            )
        if api_key == UPDATE_METADATA:
            return UpdateMetadataResponse(error_code=0)
        if api_key == STOP_REPLICA:
            return StopReplicaResponse(
                error_code=0,
                partition_errors=[
                    StopReplicaResponse.StopReplicaPartitionError(
                        topic_name=topic.topic_name, partition_index=p.partition_index, error_code=0
                    )
                    for topic in request.topic_states
                    for p in topic.partition_states
                ],
            )
        raise ValueError(f"not a controller request: api key {api_key}")
