"""The root docker-compose.yml for real: ZooKeeper, three brokers built from the Dockerfile, and the
Prometheus of ops/prometheus scraping them.

A Docker engine comes from ``../shared/container-lab/setup.sh`` (Debian's dockerd plus local
stand-ins for ``python:3.11-slim`` and ``zookeeper:3.8``); the test skips, saying why, where no
engine can be had. Each run uses its own compose project name and free host ports.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.ports import free_port

# A first run sets up the container lab (Docker engine, base images) and builds the project's image:
# minutes on two busy cores (docs/testing.md). The rest of the test and the teardown get what any
# test gets, pytest-timeout's default.
SETUP_BUDGET_S = 900
TEST_BUDGET_S = 300

pytestmark = [pytest.mark.integration, pytest.mark.timeout(SETUP_BUDGET_S + TEST_BUDGET_S)]

REPO = Path(__file__).resolve().parents[3]
LAB_SETUP = REPO.parent / "shared" / "container-lab" / "setup.sh"
LAB_DIR = Path(os.environ.get("LAB", "/tmp/container-lab"))


def _docker_env() -> dict[str, str] | None:
    """An environment whose DOCKER_HOST answers, starting the container lab if we may."""
    env = dict(os.environ)
    candidates = [env.get("DOCKER_HOST"), f"unix://{LAB_DIR}/docker.sock", None]
    for host in candidates:
        if host:
            env["DOCKER_HOST"] = host
        else:
            env.pop("DOCKER_HOST", None)
        if subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0:
            return env
    return None


def _engine(timeout: float) -> dict[str, str]:
    env = _docker_env()
    if env is not None:
        return env
    if not LAB_SETUP.exists():
        pytest.skip(f"no Docker engine reachable and no container lab at {LAB_SETUP}")
    if os.geteuid() != 0:
        pytest.skip("no Docker engine reachable, and the container lab must be set up as root")
    setup = subprocess.run(["bash", str(LAB_SETUP)], capture_output=True, text=True, timeout=timeout)
    env = _docker_env()
    if env is None:
        pytest.skip(f"the container lab did not give a Docker engine:\n{setup.stdout[-2000:]}{setup.stderr[-2000:]}")
    return env


class ComposeStack:
    def __init__(self, env: dict[str, str]) -> None:
        self.project = f"pkb{uuid.uuid4().hex[:8]}"
        self.ports = [free_port() for _ in range(3)]
        self.prometheus_port = free_port()
        self.env = dict(env, PROMETHEUS_PORT=str(self.prometheus_port),
                        **{f"BROKER{i + 1}_PORT": str(p) for i, p in enumerate(self.ports)})
        self.bootstrap = ",".join(f"localhost:{p}" for p in self.ports)

    def compose(self, *args: str, timeout: float = 600) -> str:
        cmd = ["docker-compose", "-p", self.project, "-f", str(REPO / "docker-compose.yml"), *args]
        done = subprocess.run(cmd, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def wait_for_brokers(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                md = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=5)
                if len(md.brokers) == count:
                    return
                last = sorted(md.brokers)
            except Exception as exc:  # the brokers are still starting
                last = exc
            time.sleep(1)
        raise AssertionError(f"{count} brokers not visible after {timeout}s (last: {last})\n{self.logs()}")

    def prometheus(self, path: str, **params: str) -> object:
        """The data of one Prometheus HTTP API answer."""
        url = f"http://localhost:{self.prometheus_port}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)["data"]

    def logs(self) -> str:
        try:
            return self.compose("logs", "--tail", "60", timeout=60)
        except AssertionError as exc:
            return str(exc)


@pytest.fixture
def stack() -> Iterator[ComposeStack]:
    deadline = time.monotonic() + SETUP_BUDGET_S
    stack = ComposeStack(_engine(timeout=SETUP_BUDGET_S))
    try:
        stack.compose("up", "-d", "--build", timeout=deadline - time.monotonic())
        yield stack
    finally:
        subprocess.run(
            ["docker-compose", "-p", stack.project, "-f", str(REPO / "docker-compose.yml"), "down", "-v", "-t", "20"],
            cwd=REPO, env=stack.env, capture_output=True, timeout=300,
        )


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    failures: list[object] = []
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % 3,
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(60) == 0
    assert failures == []


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got: list[str] = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        return got
    finally:
        consumer.close()


def test_three_brokers_serve_the_host_and_survive_a_restart(stack: ComposeStack) -> None:
    stack.wait_for_brokers(3)
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    topic = "compose-topic"
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(60)
    deadline = time.monotonic() + 60
    while True:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(partitions) == 3 and all(p.leader >= 0 for p in partitions.values()):
            break
        assert time.monotonic() < deadline, f"partitions without leaders: {partitions}"
        time.sleep(0.5)
    # With three partitions on three brokers, every broker leads one: producing and
    # consuming them all goes through every broker's advertised host listener.
    assert {p.leader for p in partitions.values()} == {1, 2, 3}

    first = [f"before-{i}" for i in range(300)]
    _produce(stack.bootstrap, topic, first)
    assert sorted(_consume_all(stack.bootstrap, topic, len(first))) == sorted(first)

    # Prometheus scrapes all three brokers, and sees every message produced above.
    deadline = time.monotonic() + 90
    while True:
        try:
            targets = stack.prometheus("/api/v1/targets")["activeTargets"]  # type: ignore[index]
            result = stack.prometheus("/api/v1/query", query=f'sum(kafka_server_brokertopicmetrics_messagesin_total'
                                                             f'{{topic="{topic}"}})')["result"]  # type: ignore[index]
        except OSError as exc:  # Prometheus is still starting
            targets, result = [], exc
        up = sorted(t["scrapeUrl"] for t in targets if t["health"] == "up")
        if len(up) == 3 and result and float(result[0]["value"][1]) == len(first):
            break
        assert time.monotonic() < deadline, f"Prometheus targets up: {up}, messages in: {result}\n{stack.logs()}"
        time.sleep(2)
    assert up == [f"http://broker-{i}:7071/metrics" for i in (1, 2, 3)]

    stack.compose("stop", "-t", "20", "broker-2", timeout=120)
    stack.compose("start", "broker-2", timeout=120)
    stack.wait_for_brokers(3)

    second = [f"after-{i}" for i in range(300)]
    _produce(stack.bootstrap, topic, second)
    assert sorted(_consume_all(stack.bootstrap, topic, len(first) + len(second))) == sorted(first + second)
