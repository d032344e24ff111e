"""The broker's connection to ZooKeeper over TLS (zookeeper.ssl.*), ours and Kafka 3.9's side by
side, against a ZooKeeper whose only port for them is TLS with client certificates required; the
certificate authenticates the broker, so zookeeper.set.acl gives its nodes x509 ACLs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.harness.broker import BrokerHarnessError, BrokerProcess
from tests.harness.certs import PASSWORD, TestPki
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.kafka_cli import kafka_cli
from tests.harness.zookeeper import ZooKeeperServer


def _round_trip(broker: BrokerProcess, topic: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"through a ZooKeeper over TLS")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(30)
        assert message is not None and message.value() == b"through a ZooKeeper over TLS"
    finally:
        consumer.close()


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_the_broker_keeps_its_state_in_a_zookeeper_it_reaches_over_tls(kind: str, tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    pki = TestPki(tmp_path / "pki")
    server, client = pki.issue("zookeeper", "CN=localhost"), pki.issue("broker", "CN=broker,OU=Brokers")
    tls = {"zookeeper.set.acl": "true",  # the certificate authenticates the broker: Kafka's secure ACLs
           "zookeeper.ssl.client.enable": "true",
           "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
           "zookeeper.ssl.keystore.location": str(client.pkcs12), "zookeeper.ssl.keystore.password": PASSWORD,
           "zookeeper.ssl.keystore.type": "PKCS12",
           "zookeeper.ssl.truststore.location": str(pki.ca_file), "zookeeper.ssl.truststore.type": "PEM"}
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    with ZooKeeperServer(base_dir=tmp_path / "zk", tls=(server.pkcs12, PASSWORD, pki.ca_file)) as zookeeper:
        chroot = f"tls-{uuid.uuid4().hex[:8]}"
        # the brokers get the TLS port; the harness watches ZooKeeper through the plain one
        tls["zookeeper.connect"] = zookeeper.secure_connect_string_with_chroot(chroot)
        connect = zookeeper.connect_string_with_chroot(chroot)
        broker = cls(connect, 0, tmp_path / "tls", tls)
        broker.start()
        try:
            # through the broker: the world may not create topics in ZooKeeper now
            kafka_cli(tmp_path / "cli").run("kafka-topics", ["--bootstrap-server", broker.bootstrap, "--create",
                                                             "--topic", "over-tls", "--partitions", "1"])
            broker.wait_for_leaders("over-tls", 1)
            _round_trip(broker, "over-tls")
            anonymous = KazooClient(hosts=connect)
            anonymous.start(30)
            try:
                acls = {(f"{acl.id.scheme}:{acl.id.id}", acl.perms)
                        for acl in anonymous.get_acls("/brokers/topics/over-tls")[0]}
                assert acls == {("x509:CN=broker,OU=Brokers", 31), ("world:anyone", 1)}
            finally:
                anonymous.stop()
                anonymous.close()
        finally:
            broker.stop()
        # the same port without a client certificate: ZooKeeper refuses, and the broker does not start
        without_certificate = {k: v for k, v in tls.items() if "keystore" not in k}
        refused = cls(connect, 1, tmp_path / "refused", {**without_certificate,
                                                          "zookeeper.connection.timeout.ms": "3000"})
        with pytest.raises(BrokerHarnessError):
            refused.start(timeout=60)
        refused.stop()
