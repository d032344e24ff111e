"""Bad input on secure listeners gets Kafka's behaviour and costs only its own connection: wrong
passwords, unknown mechanisms, requests before the handshake, oversized tokens, garbage and
untrusted or expired certificates in the TLS handshake; and KIP-368 re-authentication."""
from __future__ import annotations

import os
import socket
import ssl
import time
from typing import Any

import pytest

from coordination.blocking_rpc import read_response
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.framing import encode_request
from protocol.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from tests.integration.security.security_setup import PASSWORDS, kafka_python_config, kafka_python_refused_quickly

pytestmark = pytest.mark.integration

BROKER_SETTINGS = {"listener.name.sasl_plaintext.connections.max.reauth.ms": "1500",
                   "connection.failed.authentication.delay.ms": "200"}


class RawConnection:
    """Kafka requests over a bare socket, to send what well-behaved clients never would."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return read_response(self.sock, api_key, version)[1]

    def send(self, api_key: int, version: int, body: Any) -> None:
        self.correlation_id += 1
        self.sock.sendall(encode_request(body, api_key, version, self.correlation_id, "raw"))

    def closed_by_broker(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def plain_login(self, user: str, password: str, version: int = 2) -> Any:
        handshake = self.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == 0
        return self.request(ApiKey.SASL_AUTHENTICATE, version,
                            SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))

    def close(self) -> None:
        self.sock.close()


def _metadata(connection: RawConnection) -> Any:
    return connection.request(ApiKey.METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))


def test_wrong_password_is_refused_then_closed(secure_broker) -> None:
    connection = RawConnection(secure_broker.bootstrap("SASL_PLAINTEXT"))
    response = connection.plain_login("bob", "wrong")
    assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert connection.closed_by_broker()
    connection.close()

    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        config = kafka_python_config("SASL_SSL", "SCRAM-SHA-512", "alice", secure_broker.pki)
        KafkaProducer(bootstrap_servers=secure_broker.bootstrap("SASL_SSL"), request_timeout_ms=5000,
                      **{**config, **kafka_python_refused_quickly(), "sasl_plain_password": "not-alices"})
    assert "Failed authentication with /127.0.0.1" in secure_broker.broker.log_path.read_text()


def test_unknown_mechanism_lists_the_enabled_ones(secure_broker) -> None:
    connection = RawConnection(secure_broker.bootstrap("SASL_PLAINTEXT"))
    response = connection.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
    assert response.error_code == Errors.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert connection.closed_by_broker()


@pytest.mark.parametrize("first", ["sasl-authenticate", "metadata", "garbage"])
def test_requests_before_the_handshake_close_the_connection(secure_broker, first) -> None:
    connection = RawConnection(secure_broker.bootstrap("SASL_PLAINTEXT"))
    if first == "sasl-authenticate":
        connection.send(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"))
    elif first == "metadata":
        connection.send(ApiKey.METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
    else:
        connection.sock.sendall(b"\x00\x00\x00\x06\x60\x82\x02\x00\x00\x00")  # an old GSSAPI token
    assert connection.closed_by_broker()


def test_oversized_token_is_refused(secure_broker) -> None:
    connection = RawConnection(secure_broker.bootstrap("SASL_PLAINTEXT"))
    assert connection.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    connection.sock.sendall((600_000).to_bytes(4, "big") + os.urandom(1000))  # sasl.server.max.receive.size 512 KiB
    assert connection.closed_by_broker()


def _tls_connect(secure_broker, certificate=None) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(secure_broker.pki.ca_file))
    if certificate is not None:
        context.load_cert_chain(str(certificate.cert), str(certificate.key))
    host, port = secure_broker.bootstrap("SSL").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    tls = context.wrap_socket(sock, server_hostname="localhost")
    # TLS 1.3 reports a refused client certificate only on the first read.
    tls.sendall(encode_request(MetadataRequest(topics=[], allow_auto_topic_creation=False), ApiKey.METADATA, 12,
                               1, "raw"))
    read_response(tls, ApiKey.METADATA, 12)
    return tls


@pytest.mark.parametrize("kind", ["untrusted", "expired"])
def test_bad_client_certificates_fail_the_handshake(secure_broker, kind) -> None:
    certificate = secure_broker.pki.issue(f"client-{kind}", f"CN={kind}", untrusted=kind == "untrusted",
                                          expired=kind == "expired")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _tls_connect(secure_broker, certificate)
    _tls_connect(secure_broker, secure_broker.pki.issue("client-good", "CN=good")).close()
    _tls_connect(secure_broker).close()  # no certificate: ssl.client.auth=requested lets it in


def test_garbage_instead_of_a_tls_handshake(secure_broker) -> None:
    host, port = secure_broker.bootstrap("SSL").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: kafka\r\n\r\n" + os.urandom(200))
        try:
            while sock.recv(4096):  # at most a TLS alert, then the close
                pass
        except ConnectionResetError:
            pass
    assert "SSL handshake failed" in secure_broker.broker.log_path.read_text()


def test_reauthentication_and_session_expiry(secure_broker) -> None:
    connection = RawConnection(secure_broker.bootstrap("SASL_PLAINTEXT"))
    first = connection.plain_login("bob", PASSWORDS["bob"])
    assert first.error_code == 0 and first.session_lifetime_ms == 1500
    assert _metadata(connection).brokers
    # KIP-368: the same connection logs in again and gets a new session.
    again = connection.plain_login("bob", PASSWORDS["bob"])
    assert again.error_code == 0 and again.session_lifetime_ms == 1500
    assert _metadata(connection).brokers
    # Re-authenticating as someone else is refused.
    other = connection.plain_login("admin", PASSWORDS["admin"])
    assert other.error_code == Errors.SASL_AUTHENTICATION_FAILED and "Cannot change principals" in other.error_message
    assert connection.closed_by_broker()

    expiring = RawConnection(secure_broker.bootstrap("SASL_PLAINTEXT"))
    assert expiring.plain_login("bob", PASSWORDS["bob"]).error_code == 0
    time.sleep(2)
    expiring.send(ApiKey.METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
    assert expiring.closed_by_broker()


def test_the_broker_keeps_serving_others(secure_broker) -> None:
    from kafka import KafkaProducer

    secure_broker.broker.create_topic("after-bad-input")
    producer = KafkaProducer(bootstrap_servers=secure_broker.bootstrap("SASL_PLAINTEXT"),
                             **kafka_python_config("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", secure_broker.pki))
    producer.send("after-bad-input", b"still here").get(15)
    producer.close()
