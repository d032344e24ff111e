"""Clusters built per test with the broker settings replication tests need; always killed."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.harness.broker import BrokerCluster
from tests.integration.replication.replication_support import StartCluster


@pytest.fixture
def start_cluster(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StartCluster]:
    """``start_cluster(n, overrides)``: n real brokers (ids 0..n-1) on this test's ZooKeeper chroot.

    Torn down with SIGKILL (paused brokers included): nothing here tests shutdown, and a
    controlled shutdown of a half-broken cluster only makes a failing test slower.
    """
    clusters: list[BrokerCluster] = []

    def start(n: int, overrides: Mapping[str, str] | None = None) -> BrokerCluster:
        cluster = BrokerCluster(n, zk_connect, tmp_path, overrides)
        clusters.append(cluster)
        cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.kill()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for cluster in clusters:
                for b in cluster.brokers:
                    print(f"--- broker {b.broker_id} log ({b.log_path}) ---\n{b.log_tail(150)}")
