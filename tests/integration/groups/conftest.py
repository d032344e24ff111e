"""Fixtures shared by the group tests."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.broker import BrokerCluster


@pytest.fixture
def replicated_cluster(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerCluster]:
    """Three brokers whose __consumer_offsets is replicated to all three (a few partitions, to load
    quickly), with the test's own settings as an indirect parameter; broker logs are printed when
    the test failed."""
    cluster = BrokerCluster(3, zk_connect, tmp_path, {"offsets.topic.replication.factor": "3",
                                                      "offsets.topic.num.partitions": "6",
                                                      **getattr(request, "param", {})})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for b in cluster.brokers:
                print(f"--- broker {b.broker_id} log ---\n{b.log_tail(80)}")
