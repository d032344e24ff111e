"""Dynamic SSL updates without a broker: Kafka's AlterConfigs rules for security keys, the
SslFactory's checks, and an update reaching both the listener's and the inter-broker client's context."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from broker.admin.dynamic_broker_config import DynamicBrokerConfig, DynamicConfigError, loggable
from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.security.ssl_factory import SslFactory, SslReconfigurationError, SslSettings
from tests.harness.certs import TestPki

KEYSTORE = "listener.name.ssl.ssl.keystore.location"


def _config(pki: TestPki, keystore: Path, **extra: str) -> KafkaConfig:
    return KafkaConfig({
        "broker.id": "0", "zookeeper.connect": "localhost:2181", "listeners": "PLAINTEXT://:9092,SSL://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL", "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file), **extra})


@pytest.fixture
def pki(tmp_path: Path) -> TestPki:
    return TestPki(tmp_path / "pki")


def test_security_keys_follow_kafkas_dynamic_update_rules(pki: TestPki) -> None:
    dyn = DynamicBrokerConfig(_config(pki, pki.issue("b", "CN=localhost").pem_bundle))
    with pytest.raises(DynamicConfigError, match=r"only per-listener using the listener prefix: "
                                                 r"HashSet\(ssl.keystore.location\)"):
        dyn.validate({"ssl.keystore.location": "/x"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match=r"broker id must be specified: Set\(" + KEYSTORE.replace(".", r"\.")):
        dyn.validate({KEYSTORE: "/x"}, per_broker=False)
    with pytest.raises(DynamicConfigError, match=r"broker id must be specified: Set\(ssl.client.auth\)"):
        dyn.validate({"ssl.client.auth": "required"}, per_broker=False)
    dyn.validate({"listener.name.ssl.max.connections": "100"}, per_broker=False)  # a cluster-level listener key
    dyn.validate({"ssl.client.auth": "required", "listener.name.ssl.ssl.cipher.suites": ""}, per_broker=True)
    assert loggable({KEYSTORE: "/x", "listener.name.ssl.ssl.keystore.password": "secret", "x.unknown": "v"}) == {
        KEYSTORE: "/x", "listener.name.ssl.ssl.keystore.password": "[hidden]", "x.unknown": "[hidden]"}


def test_an_update_reaches_the_listener_and_the_inter_broker_client(pki: TestPki, tmp_path: Path) -> None:
    first, second = pki.issue("first", "CN=localhost,OU=B"), pki.issue("second", "CN=localhost,OU=B")
    config = _config(pki, first.pem_bundle)
    server = SslFactory.for_server(SslSettings.for_listener(config, "SSL"))
    client = SslFactory.for_client(SslSettings.for_listener(config, "SSL"))
    dyn = DynamicBrokerConfig(config)
    dyn.ssl_factories = {"SSL": [server, client]}
    contexts = (server.context, client.context)
    dyn.validate({KEYSTORE: str(second.pem_bundle)}, per_broker=True)
    assert (server.context, client.context) == contexts  # validation builds, but does not swap
    assert dyn.apply("0", {KEYSTORE: str(second.pem_bundle)}) == {KEYSTORE}
    dyn.reconfigure_ssl()
    assert server.context is not contexts[0] and client.context is not contexts[1]
    assert server.settings is not None and server.settings.keystore_location == str(second.pem_bundle)
    assert not server.reconfigure(SslSettings.for_listener(config, "SSL"))  # nothing changed: same context
    # the same name again, its file rewritten: only a reload (as AlterConfigs asks for) rebuilds
    shutil.copy(pki.issue("third", "CN=localhost,OU=B").pem_bundle, second.pem_bundle)
    before = server.context
    dyn.reconfigure_ssl()
    assert server.context is before
    dyn.reload_updated_files({KEYSTORE: str(second.pem_bundle)})
    assert server.context is not before


def test_the_factory_refuses_what_kafkas_refuses(pki: TestPki) -> None:
    config = _config(pki, pki.issue("b", "CN=localhost,OU=B").pem_bundle)
    factory = SslFactory.for_server(SslSettings.for_listener(config, "SSL"))

    def attempt(**changes: str) -> str:
        settings = SslSettings.for_listener(KafkaConfig({**config.originals, **changes}), "SSL")
        with pytest.raises(SslReconfigurationError) as caught:
            factory.validate_reconfiguration(settings)
        return str(caught.value)

    assert "Keystore DistinguishedName does not match:  existing={alias=kafka, DN=CN=localhost, OU=B}, " \
           "new={alias=kafka, DN=CN=other, OU=B}" in attempt(**{KEYSTORE: str(pki.issue("o", "CN=other,OU=B").pem_bundle)})
    fewer = pki.issue("s", "CN=localhost,OU=B", dns_names=[])
    assert "Keystore SubjectAltNames do not match:  existing={alias=kafka, SAN=[[2, localhost], [7, 127.0.0.1]]}, " \
           "new={alias=kafka, SAN=[[7, 127.0.0.1]]}" in attempt(**{KEYSTORE: str(fewer.pem_bundle)})
    assert "Failed to load PEM SSL keystore /nowhere.pem" in attempt(**{KEYSTORE: "/nowhere.pem"})
    # a key password with a key that is not encrypted: Kafka's PEM keystore cannot load that either
    assert "Failed to load PEM SSL keystore" in attempt(**{"listener.name.ssl.ssl.key.password": "secret"})
    # a keystore of the same DN in PKCS12, and more SANs: taken
    more = pki.issue("m", "CN=localhost,OU=B", dns_names=["localhost", "broker.example"])
    settings = SslSettings.for_listener(KafkaConfig({**config.originals, "listener.name.ssl.ssl.keystore.type": "PKCS12",
                                                     KEYSTORE: str(more.pkcs12),
                                                     "listener.name.ssl.ssl.keystore.password": "changeit"}), "SSL")
    assert factory.reconfigure(settings)


def test_allowed_dn_and_san_changes_come_from_the_config_the_factory_was_built_with(pki: TestPki) -> None:
    config = _config(pki, pki.issue("b", "CN=localhost").pem_bundle, **{"ssl.allow.dn.changes": "true",
                                                                         "ssl.allow.san.changes": "true"})
    factory = SslFactory.for_server(SslSettings.for_listener(config, "SSL"))
    other = pki.issue("o", "CN=other", dns_names=["other.example"])
    assert factory.reconfigure(SslSettings.for_listener(KafkaConfig({**config.originals, KEYSTORE: str(other.pem_bundle)}),
                                                        "SSL"))


def test_a_pem_keystore_and_its_key_password_go_together_at_start_up(pki: TestPki, tmp_path: Path) -> None:
    plain = pki.issue("b", "CN=localhost").pem_bundle
    with pytest.raises(ConfigError, match="ssl.key.password: is set but the PEM private key is not encrypted"):
        SslFactory.for_server(SslSettings.for_listener(_config(pki, plain, **{"ssl.key.password": "x"}), "SSL"))
    encrypted = tmp_path / "encrypted.pem"
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(pki.dir.joinpath("b.key").read_bytes(), None)
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"secret"))
                          + pki.dir.joinpath("b.crt").read_bytes())
    with pytest.raises(ConfigError, match="the PEM private key is encrypted"):
        SslFactory.for_server(SslSettings.for_listener(_config(pki, encrypted), "SSL"))
    SslFactory.for_server(SslSettings.for_listener(_config(pki, encrypted, **{"ssl.key.password": "secret"}), "SSL"))


def test_the_inter_broker_listener_keeps_old_and_new_settings_able_to_talk(pki: TestPki) -> None:
    """Kafka's SslEngineValidator: a keystore the brokers' truststore does not trust would cut the
    brokers off from each other, so the inter-broker listener refuses it; another listener takes it."""
    config = _config(pki, pki.issue("b", "CN=localhost,OU=B").pem_bundle)
    untrusted = pki.issue("u", "CN=localhost,OU=B", untrusted=True)
    settings = SslSettings.for_listener(KafkaConfig({**config.originals, KEYSTORE: str(untrusted.pem_bundle)}), "SSL")
    inter_broker = SslFactory.for_server(SslSettings.for_listener(config, "SSL"), validate_handshakes=True)
    with pytest.raises(SslReconfigurationError, match="failed: javax.net.ssl.SSLHandshakeException: .*certificate verify"):
        inter_broker.validate_reconfiguration(settings)
    trusted = pki.issue("t", "CN=localhost,OU=B")
    assert inter_broker.reconfigure(SslSettings.for_listener(
        KafkaConfig({**config.originals, KEYSTORE: str(trusted.pem_bundle)}), "SSL"))
    assert SslFactory.for_server(SslSettings.for_listener(config, "SSL")).reconfigure(settings)


def test_the_reload_after_an_alter_takes_what_was_written_whatever_the_listener_applied(pki: TestPki) -> None:
    """AlterConfigs reloads right after writing to ZooKeeper, while the config change listener
    applies the same change on its own thread, before or after: neither may undo the other."""
    first, second = pki.issue("first", "CN=localhost,OU=B"), pki.issue("second", "CN=localhost,OU=B")
    config = _config(pki, first.pem_bundle)
    server = SslFactory.for_server(SslSettings.for_listener(config, "SSL"))
    dyn = DynamicBrokerConfig(config)
    dyn.ssl_factories = {"SSL": [server]}
    written = {KEYSTORE: str(second.pem_bundle)}
    # the listener applied it first (the live config still says "first" here): the reload keeps it
    assert server.reconfigure(SslSettings.for_listener(KafkaConfig({**config.originals, **written}), "SSL"))
    dyn.reload_updated_files(written)
    assert server.settings is not None and server.settings.keystore_location == str(second.pem_bundle)
    # or the reload comes first, the listener after it
    other = SslFactory.for_server(SslSettings.for_listener(config, "SSL"))
    dyn.ssl_factories = {"SSL": [other]}
    dyn.reload_updated_files(written)
    dyn.apply("0", written)
    dyn.reconfigure_ssl()
    assert other.settings is not None and other.settings.keystore_location == str(second.pem_bundle)
