"""Brokers with their Prometheus endpoint on, each on a free port of its own."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.ports import free_port
from tests.harness.prometheus import Samples, scrape


class MeteredCluster:
    def __init__(self, n: int, zk_connect: str, tmp_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.metrics_ports = [free_port() for _ in range(n)]
        self.brokers = [BrokerProcess(zk_connect, i, tmp_dir, {
            **(overrides or {}), "metrics.prometheus.listener": f"http://127.0.0.1:{port}"})
            for i, port in enumerate(self.metrics_ports)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def metrics_targets(self) -> list[str]:
        return [f"127.0.0.1:{port}" for port in self.metrics_ports]

    def scrape(self, broker_id: int) -> Samples:
        return scrape(self.metrics_ports[broker_id])

    def scrape_all(self, broker_ids: list[int] | None = None) -> list[Samples]:
        return [self.scrape(i) for i in (range(len(self.brokers)) if broker_ids is None else broker_ids)]

    def start(self) -> None:
        for broker in self.brokers:
            broker.start()

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()

    def print_logs(self) -> None:
        for b in self.brokers:
            print(f"--- broker {b.broker_id} log ({b.log_path}) ---\n{b.log_tail(150)}")


def metered_cluster(n: int, zk_connect: str, tmp_dir: Path, request: pytest.FixtureRequest,
                    overrides: Mapping[str, str] | None = None) -> Iterator[MeteredCluster]:
    """Started, killed at the end (nothing here tests shutdown), logs printed if a test failed."""
    cluster = MeteredCluster(n, zk_connect, tmp_dir, overrides)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill()
        if any(getattr(item, "rep_call", None) is not None and item.rep_call.failed
               for item in getattr(request.session, "items", []) if item.module is request.module):
            cluster.print_logs()
