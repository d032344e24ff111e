"""SASL to ZooKeeper (the JAAS file's Client context, from KAFKA_OPTS) and zookeeper.set.acl, ours and
Kafka 3.9's side by side: the same ACLs on the same znodes, the same refusal without authentication."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL

from tests.harness.broker import BrokerHarnessError, BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.kafka_cli import kafka_cli
from tests.harness.zookeeper import ZooKeeperServer

USER, PASSWORD = "kafka", "kafka-zk-secret"
ALL, READ = 31, 1
SECURE = {(f"sasl:{USER}", ALL), ("world:anyone", READ)}  # CREATOR_ALL + READ_ACL_UNSAFE
SENSITIVE = {(f"sasl:{USER}", ALL)}  # CREATOR_ALL only
OPEN = {("world:anyone", ALL)}


def _acl(acls: list[ACL]) -> set[tuple[str, int]]:
    return {(f"{acl.id.scheme}:{acl.id.id}", acl.perms) for acl in acls}


def _broker(kind: str, connect: str, tmp_path: Path, jaas: Path | None, **overrides: str) -> BrokerProcess:
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(connect, 0, tmp_path / kind, {"zookeeper.set.acl": "true", **overrides})
    if jaas is not None:
        broker.extra_env["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={jaas}"
    return broker


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_a_broker_authenticated_with_sasl_writes_kafkas_secure_acls(kind: str, tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    jaas = tmp_path / "broker-jaas.conf"
    jaas.write_text("// the broker's login to ZooKeeper\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule "
                    f'required\n  username="{USER}"\n  password="{PASSWORD}";\n}};\n')
    with ZooKeeperServer(base_dir=tmp_path / "zk", sasl_users={USER: PASSWORD}) as zookeeper:
        chroot = f"/sasl-{uuid.uuid4().hex[:8]}"
        broker = _broker(kind, zookeeper.connect_string + chroot, tmp_path, jaas)
        broker.start()
        try:
            cli = kafka_cli(tmp_path / "cli")
            bootstrap = ["--bootstrap-server", broker.bootstrap]
            cli.run("kafka-topics", [*bootstrap, "--create", "--topic", "guarded", "--partitions", "1"])
            broker.wait_for_leaders("guarded", 1)
            cli.run("kafka-configs", [*bootstrap, "--alter", "--add-config", "SCRAM-SHA-256=[password=carol-secret]",
                                      "--entity-type", "users", "--entity-name", "carol"])
            cli.run("kafka-configs", [*bootstrap, "--alter", "--add-config", "retention.ms=60000",
                                      "--entity-type", "topics", "--entity-name", "guarded"])
            authenticated = KazooClient(hosts=zookeeper.connect_string + chroot, sasl_options={
                "mechanism": "DIGEST-MD5", "username": USER, "password": PASSWORD})
            anonymous = KazooClient(hosts=zookeeper.connect_string + chroot)
            authenticated.start(30)
            anonymous.start(30)
            try:
                expected = {
                    "/": SECURE,  # the chroot, created by the broker
                    "/brokers/ids/0": SECURE,
                    "/brokers/topics/guarded": SECURE,
                    "/brokers/topics/guarded/partitions/0/state": SECURE,
                    "/controller": SECURE,
                    "/controller_epoch": SECURE,
                    "/cluster/id": SECURE,
                    "/config/topics/guarded": SECURE,
                    "/config/users": SENSITIVE,
                    "/config/users/carol": SENSITIVE,
                    "/config/brokers": SENSITIVE,
                    "/consumers": OPEN,
                }
                found = {path: _acl(authenticated.get_acls(path)[0]) for path in expected}
                assert found == expected
                # the world reads what is not sensitive and writes nothing
                assert anonymous.get("/brokers/topics/guarded")[0]
                with pytest.raises(NoAuthError):
                    anonymous.get("/config/users/carol")
                with pytest.raises(NoAuthError):
                    anonymous.create("/brokers/topics/intruder", b"{}")
            finally:
                for client in (authenticated, anonymous):
                    client.stop()
                    client.close()
        finally:
            broker.stop()


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_secure_acls_without_authentication_stop_the_broker_with_kafkas_message(kind: str, tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    with ZooKeeperServer(base_dir=tmp_path / "zk") as zookeeper:
        broker = _broker(kind, zookeeper.connect_string_with_chroot("unauthenticated"), tmp_path, None)
        with pytest.raises(BrokerHarnessError):
            broker.start(timeout=60)
        broker.stop()
        assert ("zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at least "
                "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location was "
                "not present and the verification of the JAAS login file failed [java.security.auth.login.config="
                "null, zookeeper.sasl.client=default:true, zookeeper.sasl.clientconfig=default:Client]"
                ) in broker.log_path.read_text(errors="replace")
