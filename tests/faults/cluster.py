"""ZooKeeper and three brokers, each in its own network namespace on a test's bridge.

The brokers are ours (``python -m broker``) or Apache Kafka 3.9's (``kafka-server-start.sh`` from
``../shared/kafka-cli``), both started through ``tests/harness`` with the same settings, so one
schedule runs against either. Every broker's log dir is a small loop-mounted filesystem, so any of
them can have its disk filled. ``health()`` is the checker's view of a healed cluster: every broker
registered and answering, one controller they all agree on, every partition's ISR complete.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.clock import TEST_CLOCK_OFFSET_FILE_ENV
from tests.faults.disks import SmallDisk
from tests.faults.netns import FaultNetwork, Node
from tests.harness.broker import BrokerHarnessError, BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker
from tests.harness.kafka_cli import kafka_cli_unavailable_reason
from tests.harness.zookeeper import ZooKeeperServer

log = logging.getLogger(__name__)

BROKERS = 3
BROKER_PORT = 9092
ZK_PORT = 2181
SESSION_TIMEOUT_MS = 6000
# Both implementations get these: RF=3 with min.insync.replicas=2 everywhere (the guarantee under
# test), a lag bound short enough that a partitioned follower leaves the ISR within a round.
FAULT_CONFIG: dict[str, str] = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "5000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": str(16 << 20),
}


class OurBroker(BrokerProcess):
    """Our broker, with its test-only clock hook pointed at a file in its directory."""

    @property
    def clock_file(self) -> Path:
        return self.dir / "clock-offset-ms"

    def env(self) -> dict[str, str]:
        return {**os.environ, TEST_CLOCK_OFFSET_FILE_ENV: str(self.clock_file)}


@dataclass
class Health:
    healthy: bool
    reason: str = ""


class FaultCluster:
    def __init__(self, directory: Path, kind: str = "ours", overrides: Mapping[str, str] | None = None) -> None:
        if kind == "kafka" and (reason := kafka_cli_unavailable_reason()):
            raise BrokerHarnessError(reason)
        self.kind = kind
        self.directory = directory
        self.network = FaultNetwork()
        try:
            self.zk_node = self.network.add_node("zk")
            self.broker_nodes = [self.network.add_node(f"b{i}") for i in range(BROKERS)]
            self.zk = ZooKeeperServer(directory / "zookeeper", port=ZK_PORT, host=self.zk_node.ip,
                                      command_prefix=self.zk_node.exec_prefix())
            self.disks = [SmallDisk(self.network.tag, directory, f"b{i}-disk") for i in range(BROKERS)]
            broker_class = KafkaJavaBroker if kind == "kafka" else OurBroker
            self.brokers: list[BrokerProcess] = [
                broker_class(self.zk_connect, i, directory, {**FAULT_CONFIG, **(overrides or {})},
                             port=BROKER_PORT, host=node.ip, command_prefix=node.exec_prefix())
                for i, node in enumerate(self.broker_nodes)]
            for broker, disk in zip(self.brokers, self.disks):
                broker.log_dir = disk.mount() / "kafka-logs"
        except BaseException:
            self.network.close()
            raise

    @property
    def zk_connect(self) -> str:
        return f"{self.zk_node.ip}:{ZK_PORT}"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def node_of(self, broker_id: int) -> Node:
        return self.broker_nodes[broker_id]

    def start(self) -> None:
        self.zk.start()
        for broker in self.brokers:
            broker.start(timeout=90)
        self._create_offsets_topic()

    def _create_offsets_topic(self) -> None:
        """FindCoordinator creates __consumer_offsets (key type 0) and __transaction_state (key type 1);
        done here so that no round pays for it."""
        from protocol.messages import FindCoordinatorRequest

        for key_type in (0, 1):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    response = self.brokers[0].request(10, 3, FindCoordinatorRequest(key="faults", key_type=key_type))
                    if response.error_code == 0:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
        self.wait_healthy(60)

    def close(self) -> None:
        try:
            for broker in self.brokers:
                broker.kill()
            self.zk.stop()
        finally:
            for disk in self.disks:
                disk.unmount()
            self.network.close()

    # --- what the nemesis and the checkers look at ------------------------------------------
    def zk_client(self) -> Any:
        from coordination.kafka_zk_client import KafkaZkClient

        return KafkaZkClient.connect(self.zk_connect, 10000, connection_timeout_ms=3000, name="faults-observer")

    def controller_id(self) -> int | None:
        zk = self.zk_client()
        try:
            return zk.get_controller_id()
        finally:
            zk.close()

    def leader_of(self, topic: str, partition: int = 0) -> int:
        from coordination.model import TopicPartition

        zk = self.zk_client()
        try:
            state = zk.get_partition_states([TopicPartition(topic, partition)])
        finally:
            zk.close()
        leader = state[TopicPartition(topic, partition)].leader_and_isr.leader
        return leader if leader >= 0 else 0

    def create_topic(self, topic: str, partitions: int) -> None:
        broker = next(b for b in self.brokers if b.process is not None)
        broker.create_topic(topic, partitions, BROKERS, {"min.insync.replicas": "2"}, timeout=60)

    def health(self) -> Health:
        """Every broker registered and answering, one controller all agree on, every ISR full."""
        from coordination.model import TopicPartition

        try:
            zk = self.zk_client()
        except Exception as exc:  # ZooKeeper is down or unreachable
            return Health(False, f"ZooKeeper: {exc!r}")
        try:
            registered = sorted(zk.get_broker_ids())
            if registered != list(range(BROKERS)):
                return Health(False, f"registered brokers {registered}")
            controller = zk.get_controller_id()
            if controller not in registered:
                return Health(False, f"controller {controller}")
            partitions = []
            for topic in zk.get_all_topics():
                assignment, _ = zk.get_topic_assignment(topic)
                if assignment is not None:
                    partitions += [(TopicPartition(topic, p), a.replicas) for p, a in assignment.partitions.items()]
            states = zk.get_partition_states([tp for tp, _ in partitions])
        except Exception as exc:
            return Health(False, f"ZooKeeper: {exc!r}")
        finally:
            zk.close()
        for tp, replicas in partitions:
            state = states.get(tp)
            if state is None or state.leader_and_isr.leader < 0 or \
                    set(state.leader_and_isr.isr) != set(replicas):
                return Health(False, f"{tp.topic}-{tp.partition}: {state and state.leader_and_isr}, replicas {replicas}")
        for broker in self.brokers:
            try:
                metadata = broker.request(3, 12, _metadata_request(), timeout=3.0)
            except (OSError, ValueError) as exc:
                return Health(False, f"broker {broker.broker_id} does not answer: {exc!r}")
            if metadata.controller_id != controller or len(metadata.brokers) != BROKERS:
                return Health(False, f"broker {broker.broker_id} sees controller {metadata.controller_id} "
                                     f"and {len(metadata.brokers)} brokers")
        return Health(True)

    def wait_healthy(self, timeout: float) -> float:
        """Seconds until healthy; raises naming what is still wrong after ``timeout``."""
        start = time.monotonic()
        while True:
            health = self.health()
            if health.healthy:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise AssertionError(f"cluster not healed {timeout:.0f}s after the nemesis stopped: {health.reason}")
            time.sleep(0.25)

    def revive(self) -> list[int]:
        """Restart every broker whose process has ended (as a supervisor would); their ids."""
        revived = []
        for broker in self.brokers:
            if broker.process is None or broker.process.poll() is not None:
                log.warning("broker %d is not running; restarting it", broker.broker_id)
                broker.kill()
                broker.wait_until_deregistered(60)  # the dead broker's ZooKeeper session expires first
                broker.start(timeout=120)
                revived.append(broker.broker_id)
        return revived

    def log_tails(self, lines: int = 80) -> str:
        return "\n".join(f"--- broker {b.broker_id} ({b.log_path}) ---\n{b.log_tail(lines)}" for b in self.brokers)


def _metadata_request() -> Any:
    from protocol.messages import MetadataRequest

    return MetadataRequest(topics=[], allow_auto_topic_creation=False)
