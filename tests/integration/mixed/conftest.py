"""Mixed clusters: our brokers and real Kafka 3.9 brokers on one ZooKeeper chroot.

``start_mixed(kinds, overrides)`` is module-scoped: each module builds its cluster in a fixture
named ``mixed`` (whose broker logs are printed when a test fails), and its tests leave the cluster
whole (every broker running, every ISR full) for the next one. Everything skips, saying why,
when Kafka's distribution from ``../shared/kafka-cli`` or a Java runtime is absent.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

import pytest

from tests.harness.kafka_cli import kafka_cli_unavailable_reason
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.mixed.mixed_support import MixedCluster, StartMixed


@pytest.fixture(scope="module")
def start_mixed(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[StartMixed]:
    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)
    clusters: list[MixedCluster] = []

    def start(kinds: str, overrides: Mapping[str, str] | None = None, request_log: bool = False) -> MixedCluster:
        zk_connect = shared_zookeeper.connect_string_with_chroot(f"mixed-{uuid.uuid4().hex[:12]}")
        cluster = MixedCluster(kinds, zk_connect, tmp_path_factory.mktemp("mixed"), overrides, request_log)
        clusters.append(cluster)
        cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.kill()


@pytest.fixture(autouse=True)
def _print_mixed_logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    report = getattr(request.node, "rep_call", None)
    if report is None or not report.failed or "mixed" not in request.fixturenames:
        return
    for broker in request.getfixturevalue("mixed").brokers:
        print(f"--- {broker!r} log ({broker.log_path}) ---\n{broker.log_tail(120)}")
