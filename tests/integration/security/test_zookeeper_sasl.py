"""SASL to ZooKeeper (the JAAS file's Client context, from KAFKA_OPTS) and zookeeper.set.acl, ours and
Kafka 3.9's side by side: the same ACLs on the same znodes, the same refusal without authentication,
and the same result when Kafka's ZkSecurityMigrator secures a cluster that ran without ACLs."""

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
        broker.extra_env.update(_login_env(jaas))
    return broker


def _login_env(jaas: Path) -> dict[str, str]:
    return {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}


def _client_jaas(tmp_path: Path) -> Path:
    jaas = tmp_path / "broker-jaas.conf"
    jaas.write_text("// the broker's login to ZooKeeper\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule "
                    f'required\n  username="{USER}"\n  password="{PASSWORD}";\n}};\n')
    return jaas


def _sasl_client(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, sasl_options={"mechanism": "DIGEST-MD5", "username": USER,
                                                      "password": PASSWORD})
    client.start(30)
    return client


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_a_broker_authenticated_with_sasl_writes_kafkas_secure_acls(kind: str, tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    jaas = _client_jaas(tmp_path)
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
            authenticated = _sasl_client(zookeeper.connect_string + chroot)
            anonymous = KazooClient(hosts=zookeeper.connect_string + chroot)
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


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_kafkas_security_migrator_secures_a_cluster_that_ran_without_acls(kind: str, tmp_path: Path) -> None:
    """Kafka's documented migration: brokers already log in to ZooKeeper, the cluster's znodes are
    open; ZkSecurityMigrator --zookeeper.acl=secure sets Kafka's ACLs on every path, and the brokers,
    restarted with zookeeper.set.acl, keep their data and go on."""
    if kind == "kafka":
        kafka_broker_or_skip()
    jaas = _client_jaas(tmp_path)
    cli = kafka_cli(tmp_path / "cli")
    with ZooKeeperServer(base_dir=tmp_path / "zk", sasl_users={USER: PASSWORD}) as zookeeper:
        connect = zookeeper.connect_string + f"/migrated-{uuid.uuid4().hex[:8]}"
        broker = _broker(kind, connect, tmp_path, jaas, **{"zookeeper.set.acl": "false"})
        broker.start()
        try:
            bootstrap = ["--bootstrap-server", broker.bootstrap]
            cli.run("kafka-topics", [*bootstrap, "--create", "--topic", "before", "--partitions", "1"])
            broker.wait_for_leaders("before", 1)
            cli.run("kafka-configs", [*bootstrap, "--alter", "--add-config", "SCRAM-SHA-256=[password=carol-secret]",
                                      "--entity-type", "users", "--entity-name", "carol"])
            cli.run("kafka-console-producer", [*bootstrap, "--topic", "before"], input="kept\n")
        finally:
            broker.stop()
        authenticated = _sasl_client(connect)
        anonymous = KazooClient(hosts=connect)
        anonymous.start(30)
        try:
            assert _acl(authenticated.get_acls("/brokers/topics/before")[0]) == OPEN
            migrated = cli.run("kafka-run-class", ["kafka.admin.ZkSecurityMigrator", "--zookeeper.acl=secure",
                                                   f"--zookeeper.connect={connect}"], env=_login_env(jaas))
            # the same top-level paths exist after either broker: the tool warns about the same absent ones
            assert ("The following secure root paths do not exist in ZooKeeper: /controller,/delegation_token,"
                    "/kafka-acl-extended,/migration,/kafka-acl,/kafka-acl-changes,/kafka-acl-extended/prefixed,"
                    "/kafka-acl-extended-changes") in migrated.stdout
            expected = {"/": SECURE, "/brokers/ids": SECURE, "/brokers/topics/before": SECURE,
                        "/brokers/topics/before/partitions/0/state": SECURE, "/cluster/id": SECURE,
                        "/controller_epoch": SECURE, "/config/topics": SECURE, "/config/users": SENSITIVE,
                        "/config/users/carol": SENSITIVE, "/config/brokers": SENSITIVE, "/consumers": OPEN}
            assert {path: _acl(authenticated.get_acls(path)[0]) for path in expected} == expected

            broker = _broker(kind, connect, tmp_path, jaas)
            broker.start()
            try:
                bootstrap = ["--bootstrap-server", broker.bootstrap]
                cli.run("kafka-topics", [*bootstrap, "--create", "--topic", "after", "--partitions", "1"])
                broker.wait_for_leaders("after", 1)
                consumed = cli.run("kafka-console-consumer", [*bootstrap, "--topic", "before", "--from-beginning",
                                                              "--max-messages", "1", "--timeout-ms", "30000"])
                assert consumed.stdout.splitlines() == ["kept"]
                for path in ("/brokers/topics/after", "/brokers/ids/0", "/controller"):
                    assert _acl(authenticated.get_acls(path)[0]) == SECURE
                with pytest.raises(NoAuthError):
                    anonymous.create("/brokers/topics/intruder", b"{}")
            finally:
                broker.stop()
        finally:
            for client in (authenticated, anonymous):
                client.stop()
                client.close()
