"""Shared set-up of the security tests: certificates, users and the broker settings that use them.

Users: ``admin`` (SCRAM-SHA-256/512 and PLAIN, the brokers' own inter-broker login), ``alice``
(SCRAM-SHA-256/512) and ``bob`` (PLAIN only). Listeners: the harness's PLAINTEXT one, plus SSL
(client certificates requested), SASL_PLAINTEXT and SASL_SSL.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.security.scram import SCRAM_MECHANISMS, ScramCredential
from coordination.kafka_zk_client import KafkaZkClient
from tests.harness.certs import TestPki

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SECURE_LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="admin" password="{PASSWORDS["admin"]}" '
              f'user_admin="{PASSWORDS["admin"]}" user_bob="{PASSWORDS["bob"]}";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              f'username="admin" password="{PASSWORDS["admin"]}";')


def create_scram_users(zk_connect: str, users: tuple[str, ...] = ("admin", "alice"), iterations: int = 4096) -> None:
    """Write SCRAM credentials straight to /config/users/<user> (as kafka-configs --zookeeper does)."""
    zk = KafkaZkClient.connect(zk_connect, 10000)
    try:
        zk.create_top_level_paths()
        for user in users:
            zk.set_or_create_entity_config("users", user, {
                name: ScramCredential.from_password(m, PASSWORDS[user], iterations).to_config_value()
                for name, m in SCRAM_MECHANISMS.items()})
    finally:
        zk.close()


def secure_broker_overrides(pki: TestPki, keystore: Path) -> dict[str, str]:
    overrides = {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
        "listener.name.ssl.ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        overrides[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            overrides[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] = SCRAM_JAAS
    return overrides


def kafka_python_config(listener: str, mechanism: str | None, user: str, pki: TestPki) -> dict[str, Any]:
    config: dict[str, Any] = {"security_protocol": listener}
    if listener.endswith("SSL"):
        config["ssl_cafile"] = str(pki.ca_file)
    if mechanism:
        config.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=PASSWORDS[user])
    return config


def kafka_python_refused_quickly() -> dict[str, Any]:
    """kafka-python 3 retries a refused bootstrap for ``bootstrap_timeout_ms`` (30 s by default):
    settings for a client expected to be refused, so that it gives up after 5 s."""
    from kafka import KafkaProducer

    return {"bootstrap_timeout_ms": 5000} if "bootstrap_timeout_ms" in KafkaProducer.DEFAULT_CONFIG else {}


def librdkafka_config(listener: str, mechanism: str | None, user: str, pki: TestPki) -> dict[str, str]:
    """librdkafka property names (confluent-kafka and kcat -X)."""
    config = {"security.protocol": listener}
    if listener.endswith("SSL"):
        config["ssl.ca.location"] = str(pki.ca_file)
    if mechanism:
        config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": PASSWORDS[user]})
    return config


def java_client_properties(path: Path, listener: str, mechanism: str | None, user: str, pki: TestPki) -> Path:
    """A client.properties for Kafka's Java tools."""
    lines = [f"security.protocol={listener}"]
    if listener.endswith("SSL"):
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={pki.ca_file}"]
    if mechanism:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        lines += [f"sasl.mechanism={mechanism}",
                  f'sasl.jaas.config={module} required username="{user}" password="{PASSWORDS[user]}";']
    path.write_text("\n".join(lines) + "\n")
    return path
