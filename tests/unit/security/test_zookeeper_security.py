"""The broker's ZooKeeper security settings: KAFKA_OPTS system properties, the JAAS file's Client
context, zookeeper.set.acl's start-up check and the ACLs of the nodes it creates."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from broker.config import KafkaConfig
from broker.security.jaas import JaasConfigError, parse_jaas_file
from broker.security.jaas_context import jvm_system_properties
from broker.security.zookeeper_security import ZooKeeperSecurityError, zookeeper_client_security, zookeeper_sasl_options
from coordination.zk_client import default_acls

DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


def _config(**extra: str) -> KafkaConfig:
    return KafkaConfig.from_properties({"zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x", **extra})


def _jaas(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    return {"java.security.auth.login.config": str(path)}


def test_system_properties_come_from_the_jvm_options() -> None:
    assert jvm_system_properties({"KAFKA_OPTS": '-Xmx1g -Djava.security.auth.login.config=/etc/kafka/jaas.conf '
                                                '"-Dzookeeper.sasl.clientconfig=Zk Client" -Dflag'}) == {
        "java.security.auth.login.config": "/etc/kafka/jaas.conf", "zookeeper.sasl.clientconfig": "Zk Client",
        "flag": ""}


def test_a_jaas_file_has_login_contexts_and_comments() -> None:
    sections = parse_jaas_file(f'/* brokers */ KafkaServer {{ {DIGEST} required user_a="x}}y"; }};\n'
                               f'// ZooKeeper\nClient {{\n {DIGEST} required username="kafka" password="p";\n}};')
    assert sections["KafkaServer"][0].options == {"user_a": "x}y"}
    assert sections["Client"][0].options == {"username": "kafka", "password": "p"}
    for broken in ("Client { x required; ", "Client { x required; }", "{ x required; };"):
        with pytest.raises(JaasConfigError):
            parse_jaas_file(broken)


def test_the_client_context_becomes_digest_md5(tmp_path: Path) -> None:
    properties = _jaas(tmp_path, f'Client {{ {DIGEST} required username="kafka" password="secret"; }};\n'
                                 f'Other {{ {DIGEST} required username="other" password="o"; }};')
    assert zookeeper_sasl_options(properties) == {"mechanism": "DIGEST-MD5", "username": "kafka",
                                                  "password": "secret", "service": "zookeeper"}
    assert zookeeper_sasl_options({**properties, "zookeeper.sasl.clientconfig": "Other"})["username"] == "other"
    assert zookeeper_sasl_options({**properties, "zookeeper.sasl.clientconfig": "Missing"}) is None
    assert zookeeper_sasl_options({}) is None
    with pytest.raises(ZooKeeperSecurityError, match="JAAS configuration is present, but system property "
                                                     "zookeeper.sasl.client is set to false"):
        zookeeper_sasl_options({**properties, "zookeeper.sasl.client": "false"})


def test_a_login_context_the_broker_cannot_use_stops_it(tmp_path: Path) -> None:
    kerberos = _jaas(tmp_path, 'Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };')
    with pytest.raises(ZooKeeperSecurityError, match="only .*DigestLoginModule"):
        zookeeper_sasl_options(kerberos)
    with pytest.raises(ZooKeeperSecurityError, match="Exception while loading Zookeeper JAAS login context"):
        zookeeper_sasl_options({"java.security.auth.login.config": str(tmp_path / "missing.conf")})
    with pytest.raises(ZooKeeperSecurityError, match="needs a username and a password"):
        zookeeper_sasl_options(_jaas(tmp_path, f'Client {{ {DIGEST} required username="kafka"; }};'))


def test_secure_acls_need_sasl_or_a_tls_client_certificate(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperSecurityError, match=r"zookeeper.set.acl is true, .* failed \[java.security.auth"
                                                     r".login.config=null, zookeeper.sasl.client=default:true, "
                                                     r"zookeeper.sasl.clientconfig=default:Client\]"):
        zookeeper_client_security(_config(**{"zookeeper.set.acl": "true"}), {})
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'Client {{ {DIGEST} required username="kafka" password="secret"; }};')
    security = zookeeper_client_security(_config(**{"zookeeper.set.acl": "true"}),
                                         {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    assert security.secure_acls and security.sasl_options is not None and security.ssl_context is None
    plain = zookeeper_client_security(_config(), {})
    assert (plain.secure_acls, plain.sasl_options, plain.ssl_context) == (False, None, None)


def test_default_acls_are_kafkas() -> None:
    assert default_acls(False, "/config/users/alice") == OPEN_ACL_UNSAFE
    assert default_acls(True, "/brokers/ids/0") == CREATOR_ALL_ACL + READ_ACL_UNSAFE
    for sensitive in ("/config/users", "/config/users/alice", "/config/brokers/0", "/delegation_token/tokens/t"):
        assert default_acls(True, sensitive) == CREATOR_ALL_ACL
    assert default_acls(True, "/consumers") == OPEN_ACL_UNSAFE
    assert default_acls(True, "/consumers/group") == CREATOR_ALL_ACL + READ_ACL_UNSAFE
