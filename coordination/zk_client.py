"""The ZooKeeper connection (Kafka's ZooKeeperClient role) on kazoo.

It owns the session and turns kazoo's one-shot watches and connection states into two kinds of
callbacks, as Kafka does:
- watch handlers registered per path (`register_znode_handler`, `register_child_handler`), called
  whenever a watch set on that path fires. Reads re-arm watches. Because kazoo drops every pending
  watch when the connection drops, all handlers are also called after each reconnect, so that they
  re-read (and re-watch) the state they care about. Handlers must be cheap and idempotent: they
  are meant to enqueue "go re-read X" events.
- session handlers (`register_session_handler`): `on_session_expired()` when the session is lost and
  `on_new_session()` when a new one is established (re-register the broker, re-elect).

Every request waits for a connection for up to `connection_timeout_ms` (ZooKeeper down ->
ZooKeeperUnavailableError), like Kafka's client does.
"""
from __future__ import annotations

import functools
import logging
import queue
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from coordination.errors import ZooKeeperUnavailableError
from coordination.histogram import SynchronizedHistogram
from coordination.polling_handler import PollingThreadingHandler

log = logging.getLogger(__name__)

WatchHandler = Callable[[str], None]
# Kafka's ZkData.SensitiveRootPaths: with secure ACLs, nodes under these are not world-readable.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
CONSUMERS_PATH = "/consumers"  # the old consumers wrote under it: open even with secure ACLs


def default_acls(secure: bool, path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls: with ``zookeeper.set.acl`` the creator may do anything and the
    world read, except under sensitive paths; otherwise (and for /consumers) anyone anything."""
    if not secure or path == CONSUMERS_PATH:
        return OPEN_ACL_UNSAFE
    if path.startswith(SENSITIVE_ROOT_PATHS):
        return CREATOR_ALL_ACL
    return CREATOR_ALL_ACL + READ_ACL_UNSAFE


class SessionHandler(Protocol):
    def on_session_expired(self) -> None: ...

    def on_new_session(self) -> None: ...


def split_chroot(connect: str) -> tuple[str, str]:
    """`host1:2181,host2:2181/kafka1` -> ("host1:2181,host2:2181", "/kafka1"); no chroot -> ""."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no server")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def _parents(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b']."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


class ZooKeeperClient:
    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        name: str = "kafka",
        max_in_flight_requests: int = 10,
        ssl_context: ssl.SSLContext | None = None,
        sasl_options: dict[str, str] | None = None,
        secure_acls: bool = False,
    ) -> None:
        self.connect = connect
        self.ssl_context = ssl_context  # TLS to ZooKeeper (zookeeper.ssl.client.enable)
        self.sasl_options = sasl_options  # SASL to ZooKeeper (the JAAS file's Client section), kazoo's form
        self.secure_acls = secure_acls  # zookeeper.set.acl
        self.max_in_flight_requests = max(1, max_in_flight_requests)  # zookeeper.max.in.flight.requests
        self.hosts, self.chroot = split_chroot(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.name = name
        self._kazoo: KazooClient | None = None
        self._znode_handlers: dict[str, WatchHandler] = {}
        self._child_handlers: dict[str, WatchHandler] = {}
        self._session_handlers: dict[str, SessionHandler] = {}
        self._handlers_lock = threading.Lock()
        self._state_events: queue.Queue[str | None] = queue.Queue()
        self._state_thread: threading.Thread | None = None
        self._session_lost = False
        self._closing = False
        self._connected = threading.Event()
        # Kafka's ZooKeeperClientMetrics and SessionExpireListener meters (read by the broker's metrics).
        self.request_latency_ms = SynchronizedHistogram()
        self.expires = 0        # sessions lost (ZooKeeperExpiresPerSec)
        self.disconnects = 0    # connections lost, session kept (ZooKeeperDisconnectsPerSec)
        self.sync_connects = 0  # connections (re)established (ZooKeeperSyncConnectsPerSec)

    # --- lifecycle ---------------------------------------------------------------------------------

    def _new_kazoo(self, hosts: str) -> KazooClient:
        return KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0),
            handler=PollingThreadingHandler(self.ssl_context),
            sasl_options=dict(self.sasl_options) if self.sasl_options else None,  # kazoo adds to it
        )

    def acls(self, path: str) -> list[ACL]:
        """The ACL a node this client creates at ``path`` gets (``default_acls``)."""
        return default_acls(self.secure_acls, path)

    def _start_kazoo(self, client: KazooClient) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            client.stop()
            client.close()
            raise ZooKeeperUnavailableError(
                f"timed out after {self.connection_timeout_ms} ms connecting to ZooKeeper at {self.hosts}"
            ) from None

    def start(self) -> None:
        """Connect (creating the chroot path first if it is missing, as Kafka does)."""
        if self.chroot:
            bootstrap = self._new_kazoo(self.hosts)
            self._start_kazoo(bootstrap)
            try:
                if bootstrap.exists(self.chroot) is None:
                    for path in (*_parents(self.chroot), self.chroot):
                        try:
                            bootstrap.create(path, None, acl=self.acls(path))
                        except NodeExistsError:
                            pass
            finally:
                bootstrap.stop()
                bootstrap.close()
        client = self._new_kazoo(self.connect)
        self._start_kazoo(client)
        self._kazoo = client
        self._closing = False
        self._state_thread = threading.Thread(
            target=self._run_state_events, name=f"zk-state-{self.name}", daemon=True
        )
        self._state_thread.start()
        client.add_listener(self._on_kazoo_state)
        if client.connected:
            self._connected.set()

    def close(self) -> None:
        client, self._kazoo = self._kazoo, None
        if client is None:
            return
        self._closing = True
        self._connected.clear()
        client.remove_listener(self._on_kazoo_state)
        client.stop()
        client.close()
        self._state_events.put(None)
        if self._state_thread is not None and self._state_thread is not threading.current_thread():
            self._state_thread.join(5)

    @property
    def kazoo(self) -> KazooClient:
        if self._kazoo is None:
            raise ZooKeeperUnavailableError("the ZooKeeper client is not started")
        return self._kazoo

    @property
    def session_id(self) -> int:
        client_id = self.kazoo.client_id
        return client_id[0] if client_id else -1

    @property
    def session_password(self) -> bytes:
        client_id = self.kazoo.client_id
        return client_id[1] if client_id else b""

    @property
    def connected(self) -> bool:
        return self._kazoo is not None and self._kazoo.connected

    # --- handler registration ---------------------------------------------------------------------

    def register_znode_handler(self, path: str, handler: WatchHandler) -> None:
        with self._handlers_lock:
            self._znode_handlers[path] = handler

    def unregister_znode_handler(self, path: str) -> None:
        with self._handlers_lock:
            self._znode_handlers.pop(path, None)

    def register_child_handler(self, path: str, handler: WatchHandler) -> None:
        with self._handlers_lock:
            self._child_handlers[path] = handler

    def unregister_child_handler(self, path: str) -> None:
        with self._handlers_lock:
            self._child_handlers.pop(path, None)

    def register_session_handler(self, name: str, handler: SessionHandler) -> None:
        with self._handlers_lock:
            self._session_handlers[name] = handler

    def unregister_session_handler(self, name: str) -> None:
        with self._handlers_lock:
            self._session_handlers.pop(name, None)

    # --- watches and states ------------------------------------------------------------------------

    def _watch_fired(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:
            return  # connection state change; every handler is re-run after the reconnect
        with self._handlers_lock:
            handlers = []
            if event.type in (EventType.CREATED, EventType.DELETED, EventType.CHANGED):
                handlers.append(self._znode_handlers.get(event.path))
            if event.type in (EventType.CHILD, EventType.DELETED):
                handlers.append(self._child_handlers.get(event.path))
        for handler in handlers:
            if handler is not None:
                self._call_handler(handler, event.path)

    @staticmethod
    def _call_handler(handler: WatchHandler, path: str) -> None:
        try:
            handler(path)
        except Exception:
            log.exception("watch handler for %s failed", path)

    def _on_kazoo_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: never block here.
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        if not self._closing:
            self._state_events.put(state)

    def _run_state_events(self) -> None:
        while True:
            state = self._state_events.get()
            if state is None or self._closing:
                return
            with self._handlers_lock:
                session_handlers = list(self._session_handlers.items())
            if state == KazooState.LOST:
                self.expires += 1
                log.warning("ZooKeeper session of %s expired", self.name)
                self._session_lost = True
                for name, handler in session_handlers:
                    self._run_session_callback(name, handler.on_session_expired)
            elif state == KazooState.SUSPENDED:
                self.disconnects += 1
                log.warning("ZooKeeper connection of %s lost; waiting to reconnect", self.name)
            elif state == KazooState.CONNECTED:
                self.sync_connects += 1
                if self._session_lost:
                    self._session_lost = False
                    log.info("ZooKeeper session of %s re-established as a new session", self.name)
                    for name, handler in session_handlers:
                        self._run_session_callback(name, handler.on_new_session)
                self._rerun_watch_handlers()

    @staticmethod
    def _run_session_callback(name: str, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:
            log.exception("session handler %s failed", name)

    def _rerun_watch_handlers(self) -> None:
        with self._handlers_lock:
            calls = list(self._znode_handlers.items()) + list(self._child_handlers.items())
        for path, handler in calls:
            self._call_handler(handler, path)

    # --- requests ----------------------------------------------------------------------------------

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one kazoo `*_async` request, as Kafka's client does: wait up to the connection
        timeout for a connection, retry on connection loss, and give up with
        ZooKeeperUnavailableError (kazoo's own sync calls would wait forever while disconnected)."""
        timeout = self.connection_timeout_ms / 1000
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._connected.wait(remaining):
                break
            start = time.monotonic()
            try:
                result = fn(*args, **kwargs).get(timeout=max(remaining, self.session_timeout_ms / 1000))
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError):
                time.sleep(0.05)
                continue
            except KazooException:
                self.request_latency_ms.update((time.monotonic() - start) * 1000)  # ZooKeeper answered an error
                raise
            except KazooTimeoutError:
                break
            self.request_latency_ms.update((time.monotonic() - start) * 1000)
            return result
        raise ZooKeeperUnavailableError(
            f"ZooKeeper at {self.connect} is unavailable: no connection within {self.connection_timeout_ms} ms"
        )

    def call_many(self, requests: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run many kazoo `*_async` requests pipelined, as Kafka's ZooKeeperClient.handleRequests
        does: up to zookeeper.max.in.flight.requests outstanding, so a controller reading or writing
        thousands of partition states waits about one round trip per window instead of one each.
        Each result is kazoo's value or the KazooException ZooKeeper answered (NoNodeError, ...);
        requests the connection lost are run again one by one through ``call``."""
        results: list[Any] = [None] * len(requests)
        again: list[int] = []
        in_flight: deque[tuple[int, Any, float]] = deque()

        def collect() -> None:
            index, pending, start = in_flight.popleft()
            try:
                results[index] = pending.get(timeout=self.session_timeout_ms / 1000)
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError):
                again.append(index)
                return
            except KazooException as exc:
                results[index] = exc
            self.request_latency_ms.update((time.monotonic() - start) * 1000)

        if self._connected.is_set():
            for index, request in enumerate(requests):
                if len(in_flight) >= self.max_in_flight_requests:
                    collect()
                try:
                    in_flight.append((index, request(), time.monotonic()))
                except (ConnectionLoss, SessionExpiredError):  # kazoo refused it at once (connection closed)
                    again.append(index)
            while in_flight:
                collect()
        else:  # wait for the connection (or give up) as single calls do
            again = list(range(len(requests)))
        for index in again:
            try:
                results[index] = self.call(requests[index])
            except KazooException as exc:
                results[index] = exc
        return results

    def get_data_many(self, paths: Sequence[str], watch: bool = False) -> list[tuple[bytes | None, ZnodeStat | None]]:
        """``get_data`` of many nodes in one pipeline; (None, None) for a missing one (with ``watch``,
        whose creation is then watched as ``get_data`` does)."""
        client = self.kazoo
        results = self.call_many([functools.partial(client.get_async, path, watch=self._watch_fired if watch else None)
                                  for path in paths])
        out: list[tuple[bytes | None, ZnodeStat | None]] = []
        for path, result in zip(paths, results):
            if isinstance(result, NoNodeError):
                out.append(self.get_data(path, watch=True) if watch else (None, None))
            elif isinstance(result, Exception):
                raise result
            else:
                out.append(result)
        return out

    def get_data(self, path: str, watch: bool = False) -> tuple[bytes | None, ZnodeStat | None]:
        """The node's data and stat, (None, None) if it does not exist. With `watch`, a watch is
        left whether or not the node exists (creation, deletion and data changes fire it)."""
        client = self.kazoo
        while True:
            if watch and self.call(client.exists_async, path, watch=self._watch_fired) is None:
                return None, None
            try:
                return self.call(client.get_async, path, watch=self._watch_fired if watch else None)
            except NoNodeError:
                if not watch:
                    return None, None

    def exists(self, path: str, watch: bool = False) -> ZnodeStat | None:
        return self.call(self.kazoo.exists_async, path, watch=self._watch_fired if watch else None)

    def get_children(self, path: str, watch: bool = False) -> list[str]:
        """Children of `path` ([] if it does not exist; with `watch` its creation is watched)."""
        client = self.kazoo
        while True:
            try:
                return self.call(client.get_children_async, path, watch=self._watch_fired if watch else None)
            except NoNodeError:
                if not watch or self.call(client.exists_async, path, watch=self._watch_fired) is None:
                    return []

    def create_recursive(
        self, path: str, data: bytes | None = None, ephemeral: bool = False, sequence: bool = False
    ) -> str:
        """Create `path` (and missing parents, with null data); returns the created path.
        NodeExistsError propagates for the node itself."""
        client = self.kazoo
        acl = self.acls(path)
        try:
            return self.call(client.create_async, path, data, acl, ephemeral=ephemeral, sequence=sequence)
        except NoNodeError:
            for parent in _parents(path):
                try:
                    self.call(client.create_async, parent, None, self.acls(parent))
                except NodeExistsError:
                    pass
            return self.call(client.create_async, path, data, acl, ephemeral=ephemeral, sequence=sequence)

    def ensure_persistent_path(self, path: str) -> None:
        try:
            if self.exists(path) is None:
                self.create_recursive(path)
        except NodeExistsError:
            pass

    def set_data(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return self.call(self.kazoo.set_async, path, data, version)

    def delete(self, path: str, version: int = -1) -> None:
        self.call(self.kazoo.delete_async, path, version)

    def multi_many(self, builds: Sequence[Callable[[Any], None]]) -> list[list[Any]]:
        """Run the transactions built by each `build(transaction)`, pipelined (``call_many``); for
        each, kazoo's per-op results (on failure every entry is an exception instance, the failing
        op's one specific)."""

        def commit(build: Callable[[Any], None]) -> Any:
            transaction = self.kazoo.transaction()
            build(transaction)
            return transaction.commit_async()

        results = self.call_many([functools.partial(commit, build) for build in builds])
        for result in results:
            if isinstance(result, Exception):
                raise result
        return results

    def multi(self, build: Callable[[Any], None]) -> list[Any]:
        """One transaction (``multi_many``)."""
        return self.multi_many([build])[0]
