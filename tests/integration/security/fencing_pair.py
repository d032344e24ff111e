"""Our broker and Kafka 3.9 side by side for the fencing and authorization tests: each its own
single-broker cluster with the AclAuthorizer (no ACL: no access), a SASL_PLAINTEXT PLAIN listener
for the users ``admin`` (super user), ``alice`` and ``bob``, and raw requests as any of them.

PLAINTEXT stays the harness's and the brokers' own (ANONYMOUS is a super user there).
"""
from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordination.blocking_rpc import read_response
from coordination.kafka_zk_client import KafkaZkClient
from protocol.api_keys import ApiKey
from protocol.framing import encode_request
from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
LISTENER = "SASL_PLAINTEXT"
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              f'username="admin" password="{PASSWORDS["admin"]}" '
              + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items()) + ";")
SETTINGS = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    "super.users": "User:admin;User:ANONYMOUS",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}


class RawClient:
    """One connection logged in as a user (PLAIN), sending requests as built, for requests no client
    library sends (inter-broker ones) or sends the way the test needs."""

    def __init__(self, bootstrap: str, user: str | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation_id = 0
        if user is not None:
            assert self.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            login = self.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
                auth_bytes=f"\0{user}\0{PASSWORDS[user]}".encode()))
            assert login.error_code == 0, login

    def send(self, api_key: int, version: int, body: Any) -> None:
        self.correlation_id += 1
        self.sock.sendall(encode_request(body, api_key, version, self.correlation_id, "fencing"))

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return read_response(self.sock, api_key, version)[1]

    def closed_by_broker(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@dataclass
class FencingBroker:
    kind: str  # "ours" or "kafka"
    broker: BrokerProcess

    @property
    def sasl(self) -> str:
        return self.broker.bootstrap_for(LISTENER)

    def ask(self, user: str, api_key: int, version: int, body: Any) -> Any:
        """One request as ``user`` on a connection of its own."""
        client = RawClient(self.sasl, user)
        try:
            return client.request(api_key, version, body)
        finally:
            client.close()

    def zk(self) -> KafkaZkClient:
        return KafkaZkClient.connect(self.broker.zk_connect, 10000)


@contextmanager
def started_pair(shared_zookeeper, directory: Path) -> Iterator[list[FencingBroker]]:
    """Ours and Kafka's, started (the test is skipped when Kafka's tools are absent); stopped at the
    end, their logs' tails printed when it failed."""
    kafka_broker_or_skip()
    brokers: list[FencingBroker] = []
    try:
        for kind, cls in (("ours", BrokerProcess), ("kafka", KafkaJavaBroker)):
            zk_connect = shared_zookeeper.connect_string_with_chroot(f"fencing-{kind}-{uuid.uuid4().hex[:8]}")
            broker = cls(zk_connect, 0, directory / kind, SETTINGS, extra_listeners=(LISTENER,))
            brokers.append(FencingBroker(kind, broker))
            broker.start()
        yield brokers
    except BaseException:
        for pair_broker in brokers:
            print(f"--- {pair_broker.kind} broker log ---\n{pair_broker.broker.log_tail(80)}")
        raise
    finally:
        for pair_broker in brokers:
            pair_broker.broker.stop()
