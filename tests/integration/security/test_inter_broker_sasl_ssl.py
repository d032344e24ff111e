"""Three brokers whose replica fetchers, AlterPartition requests, controller RPCs and controlled
shutdowns all go over a SASL_SSL inter-broker listener (SCRAM-SHA-512), with clients on it too;
ACLs created through one broker are enforced by all."""
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


def _grant_alice_through_broker_0(cluster: BrokerCluster, pki: TestPki) -> None:
    """ACLs created through broker 0 reach every broker's cache through the change queue."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from protocol.messages import DescribeAclsRequest

    admin = AdminClient({**librdkafka_config("SASL_SSL", "SCRAM-SHA-512", "admin", pki),
                         "bootstrap.servers": cluster.brokers[0].bootstrap_for("SASL_SSL")})
    grants = [AclBinding(ResourceType.TOPIC, "replicated", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation[op], AclPermissionType.ALLOW) for op in ("WRITE", "READ")]
    grants.append(AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(grants).values():
        future.result(timeout=15)
    for broker in cluster.brokers:
        deadline = time.monotonic() + 15
        while True:
            described = broker.request(29, 1, DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1))
            if sum(len(r.acls) for r in described.resources) == 3:
                break
            assert time.monotonic() < deadline, f"broker {broker.broker_id} never saw the ACLs"
            time.sleep(0.1)


def test_replication_and_controller_rpcs_over_sasl_ssl(shared_zookeeper, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    zk_connect = shared_zookeeper.connect_string_with_chroot(f"sasl-ssl-{uuid.uuid4().hex[:8]}")
    pki = TestPki(tmp_path / "pki")
    keystore = pki.issue("broker", "CN=localhost,OU=Brokers").pem_bundle
    create_scram_users(zk_connect)
    overrides = {**secure_broker_overrides(pki, keystore), "inter.broker.listener.name": "SASL_SSL",
                 "offsets.topic.replication.factor": "3", "min.insync.replicas": "2",
                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                 # admin: the brokers' own login; ANONYMOUS: the harness on its PLAINTEXT listener
                 "super.users": "User:admin;User:ANONYMOUS"}
    cluster = BrokerCluster(3, zk_connect, tmp_path, overrides, extra_listeners=SECURE_LISTENERS)
    try:
        cluster.start()
        cluster.brokers[0].create_topic("replicated", partitions=3, replication_factor=3)
        client = librdkafka_config("SASL_SSL", "SCRAM-SHA-512", "alice", pki)
        _grant_alice_through_broker_0(cluster, pki)
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
