"""Real broker processes (``python -m broker``) for integration tests.

``BrokerProcess`` writes a server.properties into its own directory, starts the broker on a
free port, and ``start()`` returns once it is registered in ZooKeeper and answers ApiVersions.
Output goes to ``broker.log`` in the broker's directory (``log_tail()`` for failure reports).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.harness.ports import free_port
from tests.harness.processes import die_with_parent

REPO_ROOT = Path(__file__).resolve().parents[2]

# Quick to start and stop in tests; everything else is Kafka's default.
TEST_DEFAULTS: dict[str, str] = {
    "num.network.threads": "2",
    "num.io.threads": "4",
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


class BrokerHarnessError(RuntimeError):
    pass


def _request(host: str, port: int, api_key: int, version: int, body: Any, timeout: float = 5.0) -> Any:
    """One request/response round trip on a fresh connection."""
    from coordination.blocking_rpc import send_request

    return send_request(host, port, body, api_key, version, "test-harness", timeout)


# NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE
_NOT_LEADING_YET = frozenset({6, 3, 5})


def _leaders_serve(metadata: Any) -> bool:
    """Whether the leader of each partition in a Metadata answer (one topic) answers for it as its
    leader (ListOffsets)."""
    from protocol.messages import ListOffsetsRequest

    topic = metadata.topics[0]
    endpoints = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    by_leader: dict[int, list[int]] = {}
    for p in topic.partitions:
        by_leader.setdefault(p.leader_id, []).append(p.partition_index)
    for leader, indexes in by_leader.items():
        if leader not in endpoints:
            return False
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic.name, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=i, timestamp=-1)
                                         for i in indexes])])
        try:
            answer = _request(*endpoints[leader], 2, 5, request)
        except OSError:
            return False
        if any(p.error_code in _NOT_LEADING_YET for t in answer.topics for p in t.partitions):
            return False  # other errors (authorization, an offline dir) are a leader's answers
    return True


class BrokerConnection:
    """One client connection kept open across requests, to check that the broker keeps it open too."""

    def __init__(self, port: int, client_id: str = "test-harness", timeout: float = 15.0) -> None:
        import socket

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: Any) -> None:
        from protocol.framing import encode_request

        self.correlation_id += 1
        self.sock.sendall(encode_request(body, api_key, version, self.correlation_id, self.client_id))

    def read(self, api_key: int, version: int) -> Any:
        """The answer to the request sent last (ConnectionError if the broker closed the connection)."""
        from coordination.blocking_rpc import read_response

        correlation_id, response = read_response(self.sock, api_key, version)
        assert correlation_id == self.correlation_id, (correlation_id, self.correlation_id)
        return response

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return self.read(api_key, version)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class BrokerProcess:
    DIR_PREFIX = "broker"  # its directory in tmp_dir is <prefix>-<broker id>
    LOG_NAME = "broker.log"
    repo_root = REPO_ROOT  # the checkout whose code runs (benchmarks compare another one)

    def __init__(self, zk_connect: str, broker_id: int, tmp_dir: Path | str,
                 overrides: Mapping[str, str] | None = None, port: int | None = None,
                 host: str = "127.0.0.1", command_prefix: Sequence[str] = (),
                 extra_listeners: tuple[str, ...] = ()) -> None:
        """``host`` and ``command_prefix`` place the broker elsewhere than loopback, e.g. in a network
        namespace (``["ip", "netns", "exec", NAME]`` and that namespace's address)."""
        self.zk_connect = zk_connect
        self.host = host
        self.command_prefix = list(command_prefix)
        self.broker_id = broker_id
        self.dir = Path(tmp_dir) / f"{self.DIR_PREFIX}-{broker_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._port_chosen_here = port is None
        self.port = port or free_port()
        self.log_dir = self.dir / "kafka-logs"
        self.log_path = self.dir / self.LOG_NAME
        self.config_path = self.dir / "server.properties"
        self.overrides = dict(overrides or {})
        # More listeners (named as their security protocol, e.g. "SASL_SSL") on ports of their own;
        # the PLAINTEXT one on ``port`` stays for the harness's own checks.
        self.listener_ports = {name: free_port() for name in extra_listeners}
        self.process: subprocess.Popen[bytes] | None = None
        self.extra_env: dict[str, str] = {}  # e.g. KAFKA_OPTS, read by both kinds of broker
        self.paused = False
        self._answered_cluster_id: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        return f"{self.host}:{self.listener_ports[listener]}"

    def properties(self) -> dict[str, str]:
        listeners = [f"PLAINTEXT://{self.host}:{self.port}"]
        listeners += [f"{name}://{self.host}:{port}" for name, port in self.listener_ports.items()]
        props = {
            "broker.id": str(self.broker_id),
            "listeners": ",".join(listeners),
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": self.zk_connect,
            **TEST_DEFAULTS,
        }
        props.update(self.overrides)
        return props

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait until serving; a port taken meanwhile by another process is replaced."""
        for _ in range(3):
            try:
                return self._start_once(timeout)
            except BrokerHarnessError as exc:
                if not (self._port_chosen_here and "Address already in use" in str(exc)):
                    raise
                self.port = free_port()
        self._start_once(timeout)

    def _start_once(self, timeout: float) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*self.command_prefix, *self.command()], env=self.env(),
                cwd=self.repo_root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerHarnessError(f"broker {self.broker_id} exited with {self.process.returncode}:\n"
                                         f"{self.log_tail()}")
            if self._answers_api_versions() and self._registered() and self._registered_at_our_port() \
                    and self.process.poll() is None:
                return
            time.sleep(0.05)
        self.kill()
        raise BrokerHarnessError(f"broker {self.broker_id} did not start within {timeout}s:\n{self.log_tail()}")

    def command(self) -> list[str]:
        """What runs the broker (a subclass runs another implementation of Kafka)."""
        return [sys.executable, "-m", "broker", str(self.config_path)]

    def env(self) -> dict[str, str] | None:
        """The broker's environment; None inherits ours."""
        return {**os.environ, **self.extra_env} if self.extra_env else None

    def _answers_api_versions(self) -> bool:
        from protocol.messages import ApiVersionsRequest

        try:
            response = _request(self.host, self.port, 18, 3, ApiVersionsRequest(
                client_software_name="harness", client_software_version="1"), timeout=1.0)
        except OSError:
            return False
        return response.error_code == 0

    def _registered(self) -> bool:
        """The broker knows itself as a live broker (its UpdateMetadata from the controller arrived)."""
        metadata = self.metadata()
        self._answered_cluster_id = metadata.cluster_id
        return any(b.node_id == self.broker_id for b in metadata.brokers)

    def _registered_at_our_port(self) -> bool:
        """ZooKeeper (our chroot) has this broker at our port and the broker that answered is of
        our cluster: not another test's that took the port after free_port() chose it (ours then
        fails to bind; Kafka registers before it binds)."""
        from coordination.kafka_zk_client import KafkaZkClient

        zk = KafkaZkClient.connect(self.zk_connect, 10000)
        try:
            info = zk.get_broker_info(self.broker_id)
            cluster_id = zk.get_cluster_id()
        finally:
            zk.close()
        return info is not None and any(ep.port == self.port for ep in info.endpoints) \
            and cluster_id == self._answered_cluster_id

    def metadata(self, topics: list[str] | None = None) -> Any:
        from protocol.messages import MetadataRequest

        body = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False)
        return _request(self.host, self.port, 3, 12, body)

    def request(self, api_key: int, version: int, body: Any, timeout: float = 5.0) -> Any:
        return _request(self.host, self.port, api_key, version, body, timeout)

    def connect(self, client_id: str = "test-harness") -> BrokerConnection:
        return BrokerConnection(self.port, client_id)

    def pause(self) -> None:
        """SIGSTOP: the process freezes (no fetches, no ZooKeeper heartbeats) until ``resume()``."""
        assert self.process is not None and self.process.poll() is None, f"{self} is not running"
        self.process.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause()``; a no-op when not paused."""
        if self.paused and self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown) and wait; returns the exit code."""
        process = self.process
        if process is None:
            return None
        self.resume()  # a stopped process would only handle SIGTERM once continued
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        self.process = None
        return process.returncode

    def kill(self) -> None:
        process, self.process = self.process, None
        self.paused = False
        if process is not None and process.poll() is None:
            process.kill()  # SIGKILL ends a stopped process too
            process.wait(10)

    def dump_threads_if_stuck(self) -> None:
        """For a failure's diagnosis, before the broker is stopped: when it no longer answers
        Metadata, it writes every asyncio task's stack to its log (SIGUSR1: its handlers may all be
        waiting) and every thread's (SIGQUIT, ``kill -3``: works even when its event loop is stuck)."""
        from protocol.messages import MetadataRequest

        if self.process is None or self.process.poll() is not None or self.paused:
            return
        try:
            self.request(3, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False), timeout=3.0)
        except OSError:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
            self.process.send_signal(signal.SIGQUIT)
            time.sleep(0.5)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Mapping[str, str] | None = None, timeout: float = 15.0) -> None:
        """Write the topic to ZooKeeper (as kafka-topics --zookeeper did) and wait for its leaders."""
        from coordination.admin_zk_client import AdminZkClient, NewTopic
        from coordination.kafka_zk_client import KafkaZkClient

        zk = KafkaZkClient.connect(self.zk_connect, 10000)
        try:
            AdminZkClient(zk).create_topic(NewTopic(topic, partitions, replication_factor, configs=configs))
        finally:
            zk.close()
        self.wait_for_leaders(topic, partitions, timeout)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 15.0) -> None:
        """Until Metadata names a leader for every partition and each leader serves it: as in Kafka,
        the controller's UpdateMetadata can reach a broker before its LeaderAndIsr took effect
        (a restart), and until then the leader answers NOT_LEADER_OR_FOLLOWER."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            metadata = self.metadata([topic])
            topics = metadata.topics
            if topics and topics[0].error_code == 0 and len(topics[0].partitions) == partitions \
                    and all(p.leader_id >= 0 for p in topics[0].partitions) and _leaders_serve(metadata):
                return
            time.sleep(0.05)
        raise BrokerHarnessError(f"no leaders for {topic} after {timeout}s:\n{self.log_tail()}")

    def wait_until_deregistered(self, timeout: float = 30.0) -> None:
        """After a kill: wait for ZooKeeper to expire the old session's registration."""
        from coordination.kafka_zk_client import KafkaZkClient

        zk = KafkaZkClient.connect(self.zk_connect, 10000)
        try:
            deadline = time.monotonic() + timeout
            while zk.get_broker_info(self.broker_id) is not None:
                if time.monotonic() > deadline:
                    raise BrokerHarnessError(f"broker {self.broker_id} still registered after {timeout}s")
                time.sleep(0.05)
        finally:
            zk.close()

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"BrokerProcess(id={self.broker_id}, {self.bootstrap})"


@contextmanager
def broker_for_workload(zk_connect: str, directory: Path, overrides: Mapping[str, str] | None = None
                        ) -> Iterator[BrokerProcess]:
    """A broker started for the with-block's workload and stopped cleanly after it, so the log dir
    it leaves is a stopped broker's (what Spark jobs and Kafka's tools read); its log is printed
    when the workload fails."""
    broker = BrokerProcess(zk_connect, 0, directory, overrides)
    broker.start()
    try:
        yield broker
    except BaseException:
        print(f"--- broker log ({broker.log_path}) ---\n{broker.log_tail(200)}")
        broker.stop()
        raise
    exit_code = broker.stop()
    assert exit_code == 0, broker.log_tail(100)


class BrokerCluster:
    """``n`` brokers (ids 0..n-1) sharing one ZooKeeper connect string."""

    def __init__(self, n: int, zk_connect: str, tmp_dir: Path | str,
                 overrides: Mapping[str, str] | None = None, extra_listeners: tuple[str, ...] = ()) -> None:
        self.brokers = [BrokerProcess(zk_connect, i, tmp_dir, overrides, extra_listeners=extra_listeners)
                        for i in range(n)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def bootstrap_for(self, listener: str) -> str:
        return ",".join(b.bootstrap_for(listener) for b in self.brokers)

    def start(self) -> None:
        for broker in self.brokers:
            broker.start()

    def stop(self) -> None:
        for broker in reversed(self.brokers):
            broker.stop()

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()
