"""Fixtures for coordination tests: a cluster of registered brokers on the shared ZooKeeper."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.zk_cluster import Cluster


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    created = Cluster(zk_connect)
    try:
        yield created
    finally:
        created.close()
