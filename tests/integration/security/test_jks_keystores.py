"""Java's JKS keystores and truststores (Kafka's default ssl.*.type), made by keytool: read by
broker.security.java_keystore, and served by ours and Kafka 3.9 side by side, a PKCS12 file given as
JKS too (Java's JKS loader reads it)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from broker.security.java_keystore import KeystoreError, load_jks
from tests.harness.broker import BrokerProcess
from tests.harness.certs import PASSWORD, CertFiles, TestPki
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip

STORE_SECRET, KEY_SECRET, TRUST_SECRET = "store-secret", "key-secret", "trust-secret"


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args], check=True, capture_output=True, timeout=60)


def _jks_stores(pki: TestPki, identity: CertFiles, directory: Path) -> tuple[Path, Path]:
    """(keystore, truststore) as keytool writes them: the identity's key under its own password, the CA."""
    keystore, truststore = directory / "broker.keystore.jks", directory / "broker.truststore.jks"
    _keytool("-importkeystore", "-noprompt", "-srckeystore", str(identity.pkcs12), "-srcstoretype", "PKCS12",
             "-srcstorepass", PASSWORD, "-srcalias", "broker", "-destalias", "broker", "-destkeystore", str(keystore),
             "-deststoretype", "JKS", "-deststorepass", STORE_SECRET, "-destkeypass", KEY_SECRET)
    _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(pki.ca_file), "-keystore", str(truststore),
             "-storetype", "JKS", "-storepass", TRUST_SECRET)
    return keystore, truststore


def _der(pem_file: Path) -> list[bytes]:
    return [c.public_bytes(serialization.Encoding.DER) for c in x509.load_pem_x509_certificates(pem_file.read_bytes())]


def test_keytools_stores_are_read_and_their_passwords_checked(tmp_path: Path) -> None:
    pki = TestPki(tmp_path / "pki")
    identity = pki.issue("broker", "CN=localhost,OU=Brokers")
    keystore, truststore = _jks_stores(pki, identity, tmp_path)
    [entry] = load_jks(keystore.read_bytes(), STORE_SECRET, KEY_SECRET)
    key = serialization.load_der_private_key(entry.private_key or b"", None)
    assert key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()) == identity.key.read_bytes()
    assert (entry.alias, entry.certificates) == ("broker", _der(identity.cert))  # the chain, leaf first
    [trusted] = load_jks(truststore.read_bytes(), None)  # no password: no integrity check, as Java
    assert (trusted.alias, trusted.private_key, trusted.certificates) == ("ca", None, _der(pki.ca_file))
    with pytest.raises(KeystoreError, match="Keystore was tampered with, or password was incorrect"):
        load_jks(keystore.read_bytes(), "wrong", KEY_SECRET)
    with pytest.raises(KeystoreError, match="Cannot recover key"):
        load_jks(keystore.read_bytes(), STORE_SECRET, STORE_SECRET)
    with pytest.raises(KeystoreError, match="truncated"):
        load_jks(keystore.read_bytes()[:200] + bytes(20), None)


def _round_trip(broker: BrokerProcess, pki: TestPki, client: CertFiles) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    settings = {"bootstrap.servers": broker.bootstrap_for("SSL"), "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca_file), "ssl.certificate.location": str(client.cert),
                "ssl.key.location": str(client.key)}
    producer = Producer(settings)
    producer.produce("jks", b"over a JKS keystore")
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.assign([TopicPartition("jks", 0, 0)])
        message = consumer.poll(30)
        assert message is not None and message.value() == b"over a JKS keystore"
    finally:
        consumer.close()


@pytest.mark.parametrize("store", ["jks", "pkcs12 as jks"])
@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_an_ssl_listener_serves_with_stores_of_kafkas_default_type(kind: str, store: str, zk_connect: str,
                                                                   tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    pki = TestPki(tmp_path / "pki")
    identity, client = pki.issue("broker", "CN=localhost,OU=Brokers"), pki.issue("client", "CN=client")
    if store == "jks":
        keystore, truststore = _jks_stores(pki, identity, tmp_path)
        stores = {"ssl.keystore.location": str(keystore), "ssl.keystore.password": STORE_SECRET,
                  "ssl.key.password": KEY_SECRET, "ssl.truststore.location": str(truststore),
                  "ssl.truststore.password": TRUST_SECRET}
    else:
        stores = {"ssl.keystore.location": str(identity.pkcs12), "ssl.keystore.password": PASSWORD,
                  "ssl.truststore.location": str(pki.truststore_p12()), "ssl.truststore.password": PASSWORD}
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    # no ssl.keystore.type or ssl.truststore.type: Kafka's default, JKS
    broker = cls(zk_connect, 0, tmp_path / kind, {**stores, "ssl.client.auth": "required"}, extra_listeners=("SSL",))
    broker.start()
    try:
        broker.create_topic("jks")
        _round_trip(broker, pki, client)
    finally:
        broker.stop()


def test_a_damaged_store_is_refused_with_a_keystore_error(tmp_path: Path) -> None:
    """Every truncation and a sample of byte flips of a real store: KeystoreError, never another
    exception (without the store password the digest cannot catch them)."""
    pki = TestPki(tmp_path / "pki")
    keystore, _ = _jks_stores(pki, pki.issue("broker", "CN=localhost"), tmp_path)
    data = keystore.read_bytes()
    for size in range(len(data)):
        with pytest.raises(KeystoreError):
            load_jks(data[:size], None, KEY_SECRET)
    refused = 0
    for i in range(0, len(data), 7):
        try:
            load_jks(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:], None, KEY_SECRET)
        except KeystoreError:
            refused += 1
    assert refused > 0
