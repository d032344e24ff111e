"""A listener's keystore changed at run time (IncrementalAlterConfigs, as ``kafka-configs --alter``
does), on our broker and on Kafka 3.9 side by side: the same answers, the same certificate served
to new connections, and a restart keeps the dynamic keystore."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509

from tests.harness.broker import BrokerProcess
from tests.harness.certs import PASSWORD, CertFiles, TestPki
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.kafka_cli import kafka_cli

KEYSTORE = "listener.name.ssl.ssl.keystore.location"
REFUSED = "INVALID_REQUEST: Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic " \
          "config update of SSLFactory failed: "
FOR_CONFIGURATION = " for configuration Invalid dynamic configuration"


def _served_serial(port: int) -> int:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _serial(cert: CertFiles) -> int:
    return x509.load_pem_x509_certificates(cert.cert.read_bytes())[0].serial_number


def _wait_served(port: int, expected: int, timeout: float = 20.0) -> None:
    """New connections see ``expected`` (the change reaches the broker through ZooKeeper)."""
    deadline = time.monotonic() + timeout
    while (served := _served_serial(port)) != expected:
        assert time.monotonic() < deadline, f"still serving {served}, not {expected}"
        time.sleep(0.2)


def _alter(broker: BrokerProcess, entries: dict[str, str]) -> str:
    """``OK`` or ``ERROR_NAME: message`` of an IncrementalAlterConfigs SET on broker 0."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in entries.items()])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
    except KafkaException as exc:
        return f"{exc.args[0].name()}: {exc.args[0].str()}"
    return "OK"


def _round_trip_over_ssl(broker: BrokerProcess, pki: TestPki, topic: str) -> None:
    """A librdkafka producer and consumer on the SSL listener, verifying the broker's certificate."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    config = {"bootstrap.servers": broker.bootstrap_for("SSL"), "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca_file)}
    producer = Producer(config)
    for i in range(5):
        producer.produce(topic, b"value-%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values[-5:] == [b"value-%d" % i for i in range(5)]
    finally:
        consumer.close()


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_a_listener_keystore_is_replaced_at_run_time_as_kafka_does(kind: str, shared_zookeeper,
                                                                    tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    pki = TestPki(tmp_path / "pki")
    first, second, renewed = (pki.issue(name, "CN=localhost,OU=Brokers") for name in ("first", "second", "renewed"))
    other_dn = pki.issue("other", "CN=other,OU=Brokers")
    other_sans = pki.issue("sans", "CN=localhost,OU=Brokers", dns_names=["other.example"])
    live = tmp_path / "live-keystore.pem"  # the file a dynamic update names, later rewritten in place
    shutil.copy(second.pem_bundle, live)
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(shared_zookeeper.connect_string_with_chroot(f"dynssl-{uuid.uuid4().hex[:8]}"), 0, tmp_path / kind,
                 {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(first.pem_bundle),
                  "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file)},
                 extra_listeners=("SSL",))
    broker.start()
    try:
        port = broker.listener_ports["SSL"]
        assert _served_serial(port) == _serial(first)
        broker.create_topic("tls")

        # rotated as an operator does it, with Kafka's own tool
        cli = kafka_cli(tmp_path / "cli")
        configs = ["--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--alter"]
        done = cli.run("kafka-configs", [*configs, "--entity-name", "0", "--add-config", f"{KEYSTORE}={live}"])
        assert "Completed updating config for broker 0." in done.stdout
        _wait_served(port, _serial(second))
        _round_trip_over_ssl(broker, pki, "tls")
        refused = cli.run("kafka-configs", [*configs, "--entity-default", "--add-config", f"{KEYSTORE}={live}"],
                          check=False)
        assert refused.returncode != 0 and "InvalidRequestException: Cannot update these configs at default " \
            f"cluster level, broker id must be specified: Set({KEYSTORE})" in refused.stdout + refused.stderr

        dn_refused = REFUSED + (
            "org.apache.kafka.common.config.ConfigException: Keystore DistinguishedName does not match:  "
            "existing={alias=kafka, DN=CN=localhost, OU=Brokers}, new={alias=kafka, DN=CN=other, OU=Brokers}"
            + FOR_CONFIGURATION)
        assert _alter(broker, {KEYSTORE: str(other_dn.pem_bundle)}) == dn_refused
        # ssl.allow.dn.changes counts as the listener's SslFactory was built with it, not from this update
        assert _alter(broker, {KEYSTORE: str(other_dn.pem_bundle),
                               "listener.name.ssl.ssl.allow.dn.changes": "true"}) == dn_refused
        answer = _alter(broker, {KEYSTORE: str(other_sans.pem_bundle)})
        assert answer.startswith(REFUSED + (  # the new SANs in Java's HashSet order
            "org.apache.kafka.common.config.ConfigException: Keystore SubjectAltNames do not match:  "
            "existing={alias=kafka, SAN=[[2, localhost], [7, 127.0.0.1]]}, new={alias=kafka, SAN=[")), answer
        assert answer.endswith(FOR_CONFIGURATION) and "[2, other.example]" in answer, answer
        assert _alter(broker, {"ssl.keystore.location": str(second.pem_bundle)}) == (
            "INVALID_REQUEST: These security configs can be dynamically updated only per-listener using the "
            "listener prefix: HashSet(ssl.keystore.location)")
        missing = tmp_path / "missing.pem"
        assert _alter(broker, {KEYSTORE: str(missing)}) == REFUSED + (
            f"org.apache.kafka.common.errors.InvalidConfigurationException: Failed to load PEM SSL keystore {missing}"
            + FOR_CONFIGURATION)
        assert _served_serial(port) == _serial(second)  # every refused update left the listener as it was

        # the same file name again, its contents renewed: reloaded (Kafka checks the file's modification time)
        shutil.copy(renewed.pem_bundle, live)
        assert _alter(broker, {KEYSTORE: str(live)}) == "OK"
        _wait_served(port, _serial(renewed))
        _round_trip_over_ssl(broker, pki, "tls")

        broker.stop()
        broker.start()  # the dynamic keystore, not server.properties' one, after a restart
        assert _served_serial(port) == _serial(renewed)
    finally:
        broker.stop()


def _pkcs12_with_password(cert: CertFiles, password: str, path: Path) -> Path:
    """``cert``'s PKCS12 keystore again under another password."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    store = pkcs12.load_pkcs12(cert.pkcs12.read_bytes(), PASSWORD.encode())
    assert store.key is not None and store.cert is not None
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", store.key, store.cert.certificate, [c.certificate for c in store.additional_certs],  # type: ignore[arg-type]
        serialization.BestAvailableEncryption(password.encode())))
    return path


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_a_dynamic_password_needs_the_encoder_secret(kind: str, shared_zookeeper, tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(shared_zookeeper.connect_string_with_chroot(f"nosecret-{uuid.uuid4().hex[:8]}"), 0, tmp_path)
    broker.start()
    try:
        assert _alter(broker, {"listener.name.plaintext.plain.sasl.jaas.config": "x"}) == (
            "INVALID_CONFIG: Invalid config value for resource ConfigResource(type=BROKER, name='0'): Password "
            "encoder secret not configured")
    finally:
        broker.stop()


@pytest.mark.parametrize("writer", ["ours", "kafka"])
def test_a_dynamic_keystore_password_is_stored_encrypted_and_the_other_broker_reads_it(
        writer: str, shared_zookeeper, tmp_path: Path) -> None:
    """Rotating to a PKCS12 keystore under a new password; then the other kind of broker takes broker
    0's place on the same ZooKeeper data and serves that keystore, which it can only open with the
    password decrypted from what the first one stored."""
    from kazoo.client import KazooClient

    kafka_broker_or_skip()
    pki = TestPki(tmp_path / "pki")
    first, second = pki.issue("first", "CN=localhost,OU=Brokers"), pki.issue("second", "CN=localhost,OU=Brokers")
    rotated = _pkcs12_with_password(second, "rotated-secret", tmp_path / "rotated.p12")
    zk_connect = shared_zookeeper.connect_string_with_chroot(f"pwenc-{uuid.uuid4().hex[:8]}")
    settings = {"password.encoder.secret": "top-secret", "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(first.pkcs12), "ssl.keystore.password": PASSWORD,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file)}
    kinds: dict[str, Callable[..., BrokerProcess]] = {"ours": BrokerProcess, "kafka": KafkaJavaBroker}
    broker = kinds[writer](zk_connect, 0, tmp_path / writer, settings, extra_listeners=("SSL",))
    broker.start()
    try:
        assert _alter(broker, {KEYSTORE: str(rotated), "listener.name.ssl.ssl.keystore.password": "rotated-secret"}) \
            == "OK"
        _wait_served(broker.listener_ports["SSL"], _serial(second))
    finally:
        broker.stop()
    zk = KazooClient(zk_connect)
    zk.start()
    try:
        stored = json.loads(zk.get("/config/brokers/0")[0])["config"]["listener.name.ssl.ssl.keystore.password"]
    finally:
        zk.stop()
    fields = dict(entry.rsplit(":", 1) for entry in stored.split(","))
    assert "rotated-secret" not in stored and fields["cipherAlgorithm"] == "AES/CBC/PKCS5Padding"
    reader = kinds["kafka" if writer == "ours" else "ours"](zk_connect, 0, tmp_path / "reader", settings,
                                                           extra_listeners=("SSL",))
    reader.start()
    try:
        assert _served_serial(reader.listener_ports["SSL"]) == _serial(second)
    finally:
        reader.stop()


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_the_inter_broker_listener_refuses_a_keystore_its_truststore_does_not_trust(kind: str, shared_zookeeper,
                                                                                  tmp_path: Path) -> None:
    """Kafka checks that old and new settings of the inter-broker listener can still shake hands."""
    if kind == "kafka":
        kafka_broker_or_skip()
    pki = TestPki(tmp_path / "pki")
    untrusted = pki.issue("untrusted", "CN=localhost,OU=Brokers", untrusted=True)
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(shared_zookeeper.connect_string_with_chroot(f"ibssl-{uuid.uuid4().hex[:8]}"), 0, tmp_path / kind,
                 {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.issue("b", "CN=localhost,OU=Brokers")
                                                                           .pem_bundle),
                  "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
                  "inter.broker.listener.name": "SSL"}, extra_listeners=("SSL",))
    broker.start()
    try:
        answer = _alter(broker, {KEYSTORE: str(untrusted.pem_bundle)})
        assert answer.startswith(REFUSED + "javax.net.ssl.SSLHandshakeException: ") and \
            answer.endswith(FOR_CONFIGURATION), answer
    finally:
        broker.stop()
