"""Three brokers whose replica fetchers, AlterPartition requests, controller RPCs and controlled
shutdowns all go over a SASL_SSL inter-broker listener (SCRAM-SHA-512), with clients on it too."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.harness.broker import BrokerCluster
from tests.harness.certs import TestPki
from tests.integration.security.security_setup import (
    SECURE_LISTENERS,
    create_scram_users,
    librdkafka_config,
    secure_broker_overrides,
)

pytestmark = pytest.mark.integration


def test_replication_and_controller_rpcs_over_sasl_ssl(shared_zookeeper, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    zk_connect = shared_zookeeper.connect_string_with_chroot(f"sasl-ssl-{uuid.uuid4().hex[:8]}")
    pki = TestPki(tmp_path / "pki")
    keystore = pki.issue("broker", "CN=localhost,OU=Brokers").pem_bundle
    create_scram_users(zk_connect)
    overrides = {**secure_broker_overrides(pki, keystore), "inter.broker.listener.name": "SASL_SSL",
                 "offsets.topic.replication.factor": "3", "min.insync.replicas": "2"}
    cluster = BrokerCluster(3, zk_connect, tmp_path, overrides, extra_listeners=SECURE_LISTENERS)
    try:
        cluster.start()
        cluster.brokers[0].create_topic("replicated", partitions=3, replication_factor=3)
        client = librdkafka_config("SASL_SSL", "SCRAM-SHA-512", "alice", pki)
        producer = Producer({**client, "bootstrap.servers": cluster.bootstrap_for("SASL_SSL"), "acks": "all",
                             "enable.idempotence": True})
        for i in range(300):
            producer.produce("replicated", value=f"m{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        # Every replica in the ISR: the followers fetched over SASL_SSL and acks=all completed.
        topic = cluster.brokers[1].metadata(["replicated"]).topics[0]
        assert all(sorted(p.isr_nodes) == [0, 1, 2] for p in topic.partitions)

        consumer = Consumer({**client, "bootstrap.servers": cluster.bootstrap_for("SASL_SSL"),
                             "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["replicated"])
        values: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(values) < 300 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
        consumer.close()
        assert values == {f"m{i}".encode() for i in range(300)}

        # Controlled shutdown asks the controller over SASL_SSL; leadership moves away first.
        assert cluster.brokers[2].stop() == 0
        assert "Controlled shutdown request returned successfully" in cluster.brokers[2].log_path.read_text()
        leaders = {p.leader_id for p in cluster.brokers[0].metadata(["replicated"]).topics[0].partitions}
        assert 2 not in leaders and leaders <= {0, 1}
    finally:
        cluster.stop()
        for broker in cluster.brokers:
            log = broker.log_path.read_text() if broker.log_path.exists() else ""
            assert "Failed authentication" not in log, broker.log_tail(50)
