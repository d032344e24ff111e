"""Dynamic config notifications and producer id blocks against a real ZooKeeper, plus admin
operations while ZooKeeper is down."""
from __future__ import annotations

import queue
import threading

import pytest
from kazoo.client import KazooClient

from coordination.admin_zk_client import AdminZkClient, NewTopic
from coordination.config_change_listener import ConfigChangeListener
from coordination.errors import ZooKeeperUnavailableError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.producer_id_manager import ProducerIdManager, allocate_producer_id_block
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer
from tests.harness.zk_cluster import Cluster


def test_config_changes_reach_every_listener(cluster: Cluster) -> None:
    cluster.add_broker(1)
    cluster.add_broker(2)
    admin = AdminZkClient(cluster.brokers[1].zk)
    admin.create_topic(NewTopic("cfg", 1, 1))
    seen: dict[int, queue.Queue] = {1: queue.Queue(), 2: queue.Queue()}
    listeners = [
        ConfigChangeListener(cluster.brokers[b].zk, lambda t, n, c, b=b: seen[b].put((t, n, c))) for b in (1, 2)
    ]
    for listener in listeners:
        listener.start()
    try:
        admin.change_configs("topics", "cfg", {"retention.ms": "5000", "cleanup.policy": "compact"})
        admin.change_configs("brokers", "<default>", {"log.retention.bytes": "1024"})
        for broker_id in (1, 2):
            assert seen[broker_id].get(timeout=10) == (
                "topics", "cfg", {"retention.ms": "5000", "cleanup.policy": "compact"}
            )
            assert seen[broker_id].get(timeout=10) == ("brokers", "<default>", {"log.retention.bytes": "1024"})
        client = KazooClient(cluster.connect)
        client.start(5)
        try:
            assert client.get("/config/topics/cfg")[0] == (
                b'{"version":1,"config":{"retention.ms":"5000","cleanup.policy":"compact"}}'
            )
            assert client.get("/config/brokers/<default>")[0] == b'{"version":1,"config":{"log.retention.bytes":"1024"}}'
            changes = sorted(client.get_children("/config/changes"))
            assert changes == ["config_change_0000000000", "config_change_0000000001"]
            assert client.get("/config/changes/config_change_0000000000")[0] == (
                b'{"version":2,"entity_path":"topics/cfg"}'
            )
            # A hand-written malformed notification is logged and skipped; later ones still apply.
            client.create("/config/changes/config_change_", b"not json", sequence=True)
            admin.change_configs("topics", "cfg", {"retention.ms": "7"})
            assert seen[1].get(timeout=10) == ("topics", "cfg", {"retention.ms": "7"})
        finally:
            client.stop()
    finally:
        for listener in listeners:
            listener.close()


def test_notifications_older_than_expiry_are_purged(cluster: Cluster) -> None:
    cluster.add_broker(1)
    zk = cluster.brokers[1].zk
    zk.create_config_change_notification("topics/old")
    listener = ConfigChangeListener(zk, lambda *_: None, expiry_ms=0, clock_ms=lambda: 1 << 50)
    listener.process_notifications()
    assert zk.get_children("/config/changes") == []
    assert listener.last_executed_change == 0


def test_producer_id_blocks_are_unique_across_claimers(cluster: Cluster) -> None:
    for broker_id in (1, 2, 3):
        cluster.add_broker(broker_id)
    blocks: list = []
    lock = threading.Lock()

    def claim(broker_id: int) -> None:
        for _ in range(5):
            block = allocate_producer_id_block(cluster.brokers[broker_id].zk, broker_id)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=claim, args=(b,)) for b in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    starts = sorted(b.first_producer_id for b in blocks)
    assert starts == [i * 1000 for i in range(15)]
    client = KazooClient(cluster.connect)
    client.start(5)
    try:
        last = max(blocks, key=lambda b: b.first_producer_id)
        assert client.get("/latest_producer_id_block")[0] == (
            b'{"version":1,"broker":%d,"block_start":"14000","block_end":"14999"}' % last.broker_id
        )
    finally:
        client.stop()
    manager = ProducerIdManager(lambda: allocate_producer_id_block(cluster.brokers[1].zk, 1))
    ids = [manager.generate_producer_id() for _ in range(1001)]
    assert ids == list(range(15000, 16001))


def test_admin_operations_fail_clearly_while_zookeeper_is_down(zookeeper: ZooKeeperServer) -> None:
    zk = KafkaZkClient.connect(zookeeper.connect_string, session_timeout_ms=10000, connection_timeout_ms=1000)
    try:
        zk.create_top_level_paths()
        admin = AdminZkClient(zk)
        zookeeper.stop()
        with pytest.raises(ZooKeeperUnavailableError, match="unavailable"):
            admin.create_topic(NewTopic("while-down", 1, 1))
        zookeeper.start()
        wait_for(lambda: zk.zk.connected, what="reconnect")
        assert zk.get_all_topics() == set()
    finally:
        zk.close()
