"""Fixtures that start real external processes for integration tests."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.zookeeper import ZooKeeperServer, zookeeper_unavailable_reason


def _require_zookeeper() -> None:
    reason = zookeeper_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A fresh ZooKeeper server owned by this test (free to stop and restart it); always stopped."""
    _require_zookeeper()
    server = ZooKeeperServer(base_dir=tmp_path / "zookeeper")
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def shared_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper per test process, for tests that never stop it (isolated by chroot)."""
    _require_zookeeper()
    server = ZooKeeperServer(base_dir=tmp_path_factory.mktemp("shared-zookeeper"))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def zk_connect(shared_zookeeper: ZooKeeperServer) -> str:
    """A `zookeeper.connect` string with a chroot of its own on the shared server."""
    return shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}")
