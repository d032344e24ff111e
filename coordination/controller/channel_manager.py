"""Controller-to-broker connections (Kafka's ControllerChannelManager): one queue, one dedicated
connection and one sender thread per live broker. A request is retried (reconnecting with a
back-off) until it gets a response or the broker is removed, so requests to unreachable brokers
simply wait in their queue."""
from __future__ import annotations

import logging
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coordination.blocking_rpc import Connector, plain_connect, read_response
from coordination.model import BrokerInfo
from protocol.exceptions import ProtocolError

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Any], None]


@dataclass
class QueueItem:
    api_key: int
    version: int
    request: Any
    callback: ResponseCallback | None


class RequestSendThread:
    """Sends the queued requests of one broker, in order, one at a time (like Kafka)."""

    def __init__(
        self,
        controller_id: int,
        broker: BrokerInfo,
        listener: str,
        socket_timeout_s: float,
        retry_backoff_s: float,
        connect: Connector = plain_connect,
    ) -> None:
        self.broker = broker
        self._connect = connect
        self.listener = listener
        self.queue: queue.Queue[QueueItem | None] = queue.Queue()
        self._client_id = f"controller-{controller_id}-to-broker-{broker.broker_id}"
        self._socket_timeout_s = socket_timeout_s
        self._retry_backoff_s = retry_backoff_s
        self._stopped = threading.Event()
        self._socket: socket.socket | None = None
        self._correlation_id = 0
        self._thread = threading.Thread(target=self._run, name=f"{self._client_id}-send-thread", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self.queue.put(None)
        self._close_socket()

    def _endpoint(self) -> tuple[str, int]:
        endpoint = self.broker.endpoint(self.listener)
        if endpoint is None:
            raise ConnectionError(f"broker {self.broker.broker_id} has no listener {self.listener}")
        return endpoint.host or "localhost", endpoint.port

    def _close_socket(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _run(self) -> None:
        while not self._stopped.is_set():
            item = self.queue.get()
            if item is None:
                return
            response = self._send_until_answered(item)
            if response is not None and item.callback is not None:
                try:
                    item.callback(response)
                except Exception:
                    log.exception("callback for %s to broker %d failed", item.api_key, self.broker.broker_id)

    def _send_until_answered(self, item: QueueItem) -> Any | None:
        attempts = 0
        while not self._stopped.is_set():
            try:
                return self._send_once(item)
            except (OSError, ProtocolError) as exc:
                if self._stopped.is_set():
                    return None  # closed under us by stop()
                attempts += 1
                level = logging.WARNING if attempts == 1 else logging.DEBUG
                log.log(level, "controller request %s to broker %d failed (%s); retrying until it "
                        "succeeds or the broker is gone", item.api_key, self.broker.broker_id, exc)
                self._close_socket()
                self._stopped.wait(self._retry_backoff_s)
        return None

    def _send_once(self, item: QueueItem) -> Any:
        from protocol.framing import encode_request

        sock = self._socket
        if sock is None:
            host, port = self._endpoint()
            sock = self._connect(host, port, self._socket_timeout_s, self._client_id)
            self._socket = sock
        self._correlation_id += 1
        frame = encode_request(item.request, item.api_key, item.version, self._correlation_id, self._client_id)
        sock.sendall(frame)
        correlation_id, response = read_response(sock, item.api_key, item.version)
        if correlation_id != self._correlation_id:
            raise ConnectionError(f"correlation id {correlation_id} != {self._correlation_id}")
        return response



class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        listener: str = "PLAINTEXT",
        socket_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        connect: Connector = plain_connect,
    ) -> None:
        self.controller_id = controller_id
        self._connect = connect
        self.listener = listener
        self._socket_timeout_s = socket_timeout_ms / 1000
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._threads: dict[int, RequestSendThread] = {}
        self._lock = threading.Lock()

    def startup(self, brokers: list[BrokerInfo]) -> None:
        for broker in brokers:
            self.add_broker(broker)

    def shutdown(self) -> None:
        with self._lock:
            threads, self._threads = self._threads, {}
        for thread in threads.values():
            thread.stop()

    def add_broker(self, broker: BrokerInfo) -> None:
        with self._lock:
            if broker.broker_id in self._threads:
                return
            thread = RequestSendThread(
                self.controller_id, broker, self.listener, self._socket_timeout_s, self._retry_backoff_s,
                self._connect
            )
            self._threads[broker.broker_id] = thread
        thread.start()

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            thread = self._threads.pop(broker_id, None)
        if thread is not None:
            thread.stop()

    def send(
        self, broker_id: int, api_key: int, version: int, request: Any, callback: ResponseCallback | None = None
    ) -> None:
        with self._lock:
            thread = self._threads.get(broker_id)
        if thread is None:
            log.warning("not sending %s to broker %d: it is not live", api_key, broker_id)
            return
        thread.queue.put(QueueItem(api_key, version, request, callback))
