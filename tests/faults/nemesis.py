"""The nemesis: faults injected into a running ``FaultCluster`` and healed again.

Every fault has ``start(cluster, focus)`` (``focus`` is the topic whose partition-0 leader is the
victim where one is needed; it returns what it did, for the history) and ``stop(cluster)``, which
heals it: firewall rules flushed, delays lifted, processes continued or restarted, disks freed,
clocks set right. The test process's own link (the clients') is never cut.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.cluster import FaultCluster, KafkaJavaBroker, OurBroker
from tests.faults.netns import Node

REPO_ROOT = Path(__file__).resolve().parents[2]
DELAY_QUEUE = 7


class NotSupported(RuntimeError):
    """This fault cannot be injected into this implementation (e.g. no clock hook in Kafka)."""


def _drop_between(a: Node, b: Node) -> None:
    """Silently drop every packet between two namespaces (both directions, both sides)."""
    for here, there in ((a, b), (b, a)):
        here.run("iptables", "-A", "INPUT", "-s", there.ip, "-j", "DROP")
        here.run("iptables", "-A", "OUTPUT", "-d", there.ip, "-j", "DROP")


def _all_nodes(cluster: FaultCluster) -> list[Node]:
    return [cluster.zk_node, *cluster.broker_nodes]


def _flush(cluster: FaultCluster) -> None:
    for node in _all_nodes(cluster):
        node.run("iptables", "-F", check=False)


@dataclass
class Nemesis:
    """Base: a named fault that lasts ``duration`` seconds in a round."""
    name: str
    duration: float = 6.0

    def start(self, cluster: FaultCluster, focus: str) -> str:
        raise NotImplementedError

    def stop(self, cluster: FaultCluster) -> None:
        raise NotImplementedError


@dataclass
class Partition(Nemesis):
    """Network partitions by iptables DROP rules inside the namespaces.

    ``shape``: ``one`` isolates the focus leader from ZooKeeper and the other brokers; ``controller-zk``
    cuts the controller from ZooKeeper only; ``leader-followers`` cuts the focus leader from its
    followers only (ZooKeeper and clients still reach it); ``bridge`` cuts {leader, ZooKeeper} from
    {one follower} while the other follower sees everyone (Jepsen's bridge).
    """
    shape: str = "one"

    def start(self, cluster: FaultCluster, focus: str) -> str:
        leader = cluster.leader_of(focus)
        others = [i for i in range(len(cluster.brokers)) if i != leader]
        node = cluster.node_of
        if self.shape == "one":
            for other in [cluster.zk_node, *(node(i) for i in others)]:
                _drop_between(node(leader), other)
            return f"broker {leader} (leader of {focus}-0) cut from ZooKeeper and brokers {others}"
        if self.shape == "controller-zk":
            controller = cluster.controller_id()
            if controller is None:
                raise RuntimeError("no controller to cut from ZooKeeper")
            _drop_between(node(controller), cluster.zk_node)
            return f"controller {controller} cut from ZooKeeper"
        if self.shape == "leader-followers":
            for other in others:
                _drop_between(node(leader), node(other))
            return f"broker {leader} (leader of {focus}-0) cut from brokers {others}"
        if self.shape == "bridge":
            bridge, far = others
            _drop_between(node(leader), node(far))
            _drop_between(cluster.zk_node, node(far))
            return f"{{broker {leader}, ZooKeeper}} | {{broker {far}}}, broker {bridge} bridging"
        raise ValueError(self.shape)

    def stop(self, cluster: FaultCluster) -> None:
        _flush(cluster)


@dataclass
class Loss(Nemesis):
    """Every namespace drops each incoming packet with ``probability`` (iptables statistic match)."""
    probability: float = 0.1

    def start(self, cluster: FaultCluster, focus: str) -> str:
        for node in _all_nodes(cluster):
            node.run("iptables", "-A", "INPUT", "-i", node.netns, "-m", "statistic", "--mode", "random",
                     "--probability", str(self.probability), "-j", "DROP")
        return f"{self.probability:.0%} of packets dropped on entry to every node"

    def stop(self, cluster: FaultCluster) -> None:
        _flush(cluster)


@dataclass
class Latency(Nemesis):
    """Every namespace delays its outgoing packets by ``delay_ms`` (NFQUEUE and ``net_delay``; this
    kernel has no netem: see ``net_delay.py`` for how it differs)."""
    delay_ms: float = 60.0
    _delayers: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, cluster: FaultCluster, focus: str) -> str:
        for node in _all_nodes(cluster):
            delayer = subprocess.Popen(
                [*node.exec_prefix(), sys.executable, "-m", "tests.faults.net_delay", "--queue", str(DELAY_QUEUE),
                 "--delay-ms", str(self.delay_ms)],
                cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self._delayers.append(delayer)
            assert delayer.stdout is not None
            ready = delayer.stdout.readline()
            if not ready.startswith("net_delay:"):
                raise RuntimeError(f"net_delay did not start in {node.netns}: {ready}")
            node.run("iptables", "-A", "OUTPUT", "-o", node.netns, "-j", "NFQUEUE",
                     "--queue-num", str(DELAY_QUEUE), "--queue-bypass")
        return f"{self.delay_ms:.0f} ms added to every packet leaving every node"

    def stop(self, cluster: FaultCluster) -> None:
        _flush(cluster)
        for delayer in self._delayers:
            delayer.terminate()  # it accepts what it still holds before it exits
        for delayer in self._delayers:
            try:
                delayer.wait(10)
            except subprocess.TimeoutExpired:
                delayer.kill()
                delayer.wait(10)
        self._delayers.clear()


@dataclass
class Pause(Nemesis):
    """SIGSTOP the focus leader's broker for longer than zookeeper.session.timeout.ms, then SIGCONT."""
    _paused: int | None = None

    def start(self, cluster: FaultCluster, focus: str) -> str:
        self._paused = cluster.leader_of(focus)
        cluster.brokers[self._paused].pause()
        return f"broker {self._paused} (leader of {focus}-0) stopped"

    def stop(self, cluster: FaultCluster) -> None:
        if self._paused is not None:
            cluster.brokers[self._paused].resume()
        self._paused = None


@dataclass
class Kill(Nemesis):
    """SIGKILL the focus leader's broker; start it again at the end."""

    def start(self, cluster: FaultCluster, focus: str) -> str:
        victim = cluster.leader_of(focus)
        cluster.brokers[victim].kill()
        return f"broker {victim} (leader of {focus}-0) killed with SIGKILL"

    def stop(self, cluster: FaultCluster) -> None:
        cluster.revive()


@dataclass
class KillZooKeeper(Nemesis):
    """SIGKILL ZooKeeper; start it again (same data) at the end."""

    def start(self, cluster: FaultCluster, focus: str) -> str:
        cluster.zk.kill()
        return "ZooKeeper killed with SIGKILL"

    def stop(self, cluster: FaultCluster) -> None:
        cluster.zk.start()


@dataclass
class FillDisk(Nemesis):
    """Fill the focus leader's log dir filesystem; free it at the end and restart the broker if it
    went down (Kafka halts a broker whose every log dir failed)."""
    _victim: int | None = None

    def start(self, cluster: FaultCluster, focus: str) -> str:
        self._victim = cluster.leader_of(focus)
        taken = cluster.disks[self._victim].fill()
        return f"log dir of broker {self._victim} (leader of {focus}-0) filled ({taken >> 20} MiB)"

    def stop(self, cluster: FaultCluster) -> None:
        if self._victim is not None:
            cluster.disks[self._victim].free()
        self._victim = None
        cluster.revive()


@dataclass
class ClockJump(Nemesis):
    """Jump the focus leader's wall clock forward by ``jump_s``; at the end step it back (as NTP
    would step a clock that ran ahead)."""
    jump_s: float = 600.0
    _victim: int | None = None

    def start(self, cluster: FaultCluster, focus: str) -> str:
        victim = cluster.leader_of(focus)
        set_clock_offset(cluster, victim, int(self.jump_s * 1000))
        self._victim = victim
        return f"clock of broker {victim} (leader of {focus}-0) jumped {self.jump_s:+.0f} s"

    def stop(self, cluster: FaultCluster) -> None:
        if self._victim is not None:
            set_clock_offset(cluster, self._victim, 0)
        self._victim = None


def set_clock_offset(cluster: FaultCluster, broker_id: int, offset_ms: int) -> None:
    broker = cluster.brokers[broker_id]
    if isinstance(broker, KafkaJavaBroker) or not isinstance(broker, OurBroker):
        raise NotSupported("Kafka has no clock hook: time namespaces do not move CLOCK_REALTIME, and "
                           "Debian's libfaketime 0.9.10 makes monotonic sleeps fail with EINVAL")
    broker.clock_file.write_text(str(offset_ms))
    if broker.process is not None and broker.process.poll() is None:
        os.kill(broker.process.pid, signal.SIGUSR2)


def default_schedule() -> list[Nemesis]:
    """One of each fault, short: the suite's default run (and the README's table)."""
    return [
        Partition("partition-one", shape="one"),
        Partition("partition-controller-zk", shape="controller-zk"),
        Partition("partition-leader-followers", shape="leader-followers"),
        Partition("partition-bridge", shape="bridge"),
        Latency("latency"),
        Loss("loss"),
        Pause("pause", duration=8.0),  # > zookeeper.session.timeout.ms (6 s)
        Kill("kill-9"),
        KillZooKeeper("zookeeper-kill"),
        FillDisk("disk-full"),
        ClockJump("clock-jump"),
    ]


def mixed_schedule(rng: random.Random) -> Nemesis:
    """One fault for a soak round: any kind, with a duration of 5 to 30 seconds."""
    nemesis = rng.choice(default_schedule())
    nemesis.duration = rng.uniform(max(5.0, nemesis.duration), 30.0)
    return nemesis
