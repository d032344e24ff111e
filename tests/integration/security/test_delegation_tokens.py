"""Delegation tokens through Kafka's own kafka-delegation-tokens tool (DelegationTokenCommand), and Java clients logging in with
one (SCRAM, tokenauth=true): ours and Kafka 3.9 side by side, the same answers from both."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_delegation_tokens import DelegationTokenStore, TokenInformation
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.kafka_cli import KafkaCli, kafka_cli

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SETTINGS = {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "delegation.token.secret.key": "token-secret",
            "delegation.token.expiry.check.interval.ms": "1000",
            # Kafka wants a JAAS entry for a SCRAM listener even though the users are in ZooKeeper
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;"}


def _client(path: Path, user: str, password: str, token: bool = False) -> Path:
    extension = ' tokenauth="true"' if token else ""
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f'sasl.jaas.config={SCRAM_MODULE} required username="{user}" password="{password}"{extension};\n')
    return path


def _tokens(cli: KafkaCli, bootstrap: str, config: Path, *args: str, check: bool = True) -> str:
    # kafka-delegation-tokens.sh runs this class; ../shared/kafka-cli ships the class, not the script
    done = cli.run("kafka-run-class", ["org.apache.kafka.tools.DelegationTokenCommand", "--bootstrap-server",
                                       bootstrap, "--command-config", str(config), *args], check=check, timeout=60)
    return done.stdout + done.stderr


def _stored_token(broker: BrokerProcess, token_id: str) -> TokenInformation | None:
    zk = KafkaZkClient.connect(broker.zk_connect)
    try:
        return DelegationTokenStore(zk).get(token_id)
    finally:
        zk.close()


def _can_list_topics(cli: KafkaCli, bootstrap: str, config: Path) -> bool:
    done = cli.run("kafka-topics", ["--bootstrap-server", bootstrap, "--command-config", str(config), "--list"],
                   check=False, timeout=60, env={"KAFKA_OPTS": "-Dkafka.admin.client.request.timeout.ms=10000"})
    return done.returncode == 0 and "tokens" in done.stdout


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_tokens_are_created_used_renewed_and_expired_with_the_delegation_token_tool(kind: str, zk_connect: str,
                                                                      tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(zk_connect, 0, tmp_path / kind, SETTINGS, extra_listeners=("SASL_PLAINTEXT",))
    broker.start()
    try:
        cli = kafka_cli(tmp_path / "cli")
        cli.run("kafka-configs", ["--bootstrap-server", broker.bootstrap, "--alter", "--add-config",
                                  "SCRAM-SHA-256=[password=admin-secret]", "--entity-type", "users",
                                  "--entity-name", "admin"])
        broker.create_topic("tokens")
        sasl = broker.bootstrap_for("SASL_PLAINTEXT")
        admin = _client(tmp_path / "admin.properties", "admin", "admin-secret")
        created = _tokens(cli, sasl, admin, "--create", "--max-life-time-period", "-1",
                          "--renewer-principal", "User:bob")
        found = re.search(r"^(\S{22})\s+(\S+==)\s+User:admin\s+User:admin\s+\[User:bob\]", created, re.M)
        assert found is not None, created
        token_id, digest = found.groups()
        short_lived = re.search(r"tokenId : (\S+)", _tokens(cli, sasl, admin, "--create", "--max-life-time-period",
                                                             "5000"))
        assert short_lived is not None
        stored = _stored_token(broker, token_id)  # the znode either kind wrote, read as the other kind reads it
        assert (stored.owner, stored.token_requester, stored.renewers) == ("User:admin", "User:admin", ["User:bob"])
        described = _tokens(cli, sasl, admin, "--describe", "--owner-principal", "User:admin")
        assert token_id in described and digest in described
        # Kafka 3.9's tool sends an empty owner list without --owner-principal: brokers answer no tokens
        assert "Total number of tokens : 0" in _tokens(cli, sasl, admin, "--describe")

        token = _client(tmp_path / "token.properties", token_id, digest, token=True)
        assert _can_list_topics(cli, sasl, token)  # logged in as the token's owner
        wrong = _client(tmp_path / "wrong.properties", token_id, digest[:-4] + "AAA=", token=True)
        assert not _can_list_topics(cli, sasl, wrong)
        # a token's own session may not create tokens, nor may a PLAINTEXT connection
        refused = _tokens(cli, sasl, token, "--create", "--max-life-time-period", "-1", check=False)
        assert "DelegationTokenRequestNotAllowed" in refused or "not allowed" in refused.lower(), refused
        plaintext = tmp_path / "plaintext.properties"
        plaintext.write_text("security.protocol=PLAINTEXT\n")
        refused = _tokens(cli, broker.bootstrap, plaintext, "--create", "--max-life-time-period", "-1", check=False)
        assert "not allowed" in refused.lower() or "DelegationTokenRequestNotAllowed" in refused, refused

        renewed = _tokens(cli, sasl, admin, "--renew", "--renew-time-period", "-1", "--hmac", digest)
        assert "Completed renew operation" in renewed, renewed
        expired = _tokens(cli, sasl, admin, "--expire", "--expiry-time-period", "-1", "--hmac", digest)
        assert "Completed expire operation" in expired, expired
        assert token_id not in _tokens(cli, sasl, admin, "--describe", "--owner-principal", "User:admin")
        assert not _can_list_topics(cli, sasl, token)
        missing = _tokens(cli, sasl, admin, "--renew", "--renew-time-period", "-1", "--hmac", digest, check=False)
        assert "DelegationTokenNotFound" in missing or "not found" in missing.lower(), missing
        # past its 5 s maximum lifetime the other token is removed by the expiry check (every second here)
        deadline = time.monotonic() + 20
        while _stored_token(broker, short_lived.group(1)) is not None:
            assert time.monotonic() < deadline, "the expired token was never removed"
            time.sleep(0.5)
    finally:
        broker.stop()
