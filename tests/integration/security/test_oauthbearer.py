"""SASL/OAUTHBEARER with Kafka's default unsecured tokens, side by side with Kafka 3.9: librdkafka's
and kafka-python's tokens and the Java console producer's own login, a required scope refused when
missing, and (ours) brokers replicating over OAUTHBEARER."""
from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.security.oauthbearer import OAUTHBEARER_LOGIN_MODULE, unsecured_token
from tests.harness.broker import BrokerProcess
from tests.harness.identity_provider import IdentityProvider
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.kafka_cli import kafka_cli

pytestmark = pytest.mark.integration

LISTENER = "SASL_PLAINTEXT"
SERVER_JAAS = (f'{OAUTHBEARER_LOGIN_MODULE} required unsecuredLoginStringClaim_sub="admin" '
               f'unsecuredLoginListClaim_scope=",kafka" unsecuredValidatorRequiredScope="kafka";')
SETTINGS = {"sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": SERVER_JAAS}


@pytest.fixture(scope="module", params=["ours", "kafka"])
def oauth_broker(request: pytest.FixtureRequest, shared_zookeeper,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    kind = request.param
    if kind == "kafka":
        kafka_broker_or_skip()
    cls = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(shared_zookeeper.connect_string_with_chroot(f"oauth-{uuid.uuid4().hex[:8]}"), 0,
                 tmp_path_factory.mktemp(f"oauth-{kind}"), SETTINGS, extra_listeners=(LISTENER,))
    broker.start()
    try:
        broker.create_topic("oauth")
        yield broker
    finally:
        broker.stop()


def _librdkafka(broker: BrokerProcess, token_config: str) -> dict[str, object]:
    return {"bootstrap.servers": broker.bootstrap_for(LISTENER), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": token_config}


def test_librdkafka_with_the_required_scope_produces_and_consumes(oauth_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    config = _librdkafka(oauth_broker, "principal=alice scope=kafka,other extension_traceId=abc")
    producer = Producer(config)
    producer.produce("oauth", b"by token")
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "oauth-readers"})
    try:
        consumer.assign([TopicPartition("oauth", 0, 0)])
        message = consumer.poll(30)
        assert message is not None and message.error() is None and message.value() == b"by token"
    finally:
        consumer.close()


def test_a_token_without_the_required_scope_is_refused(oauth_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    deliveries: list[KafkaError | None] = []
    producer = Producer({**_librdkafka(oauth_broker, "principal=alice scope=other"),
                         "error_cb": errors.append, "message.timeout.ms": 4000})
    producer.produce("oauth", b"refused", on_delivery=lambda error, _message: deliveries.append(error))
    producer.flush(10)
    assert len(deliveries) == 1 and deliveries[0] is not None  # never delivered
    assert any(e.code() == KafkaError._AUTHENTICATION and "insufficient_scope" in e.str() for e in errors), errors


def test_kafka_python_with_an_unsecured_token(oauth_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def __init__(self, scope: str) -> None:
            super().__init__()
            self.scope = scope

        def token(self) -> str:
            return unsecured_token({"unsecuredLoginStringClaim_sub": "bob",
                                    "unsecuredLoginListClaim_scope": self.scope})

    producer = KafkaProducer(bootstrap_servers=oauth_broker.bootstrap_for(LISTENER), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Tokens(",kafka"))
    try:
        producer.send("oauth", b"kafka-python").get(timeout=30)
    finally:
        producer.close()
    with pytest.raises(KafkaPythonError):
        KafkaProducer(bootstrap_servers=oauth_broker.bootstrap_for(LISTENER), security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Tokens(",other"),
                      bootstrap_timeout_ms=3000).send("oauth", b"no").get(timeout=10)


def test_the_java_console_producer_logs_in_with_kafkas_unsecured_login(oauth_broker: BrokerProcess,
                                                                      tmp_path: Path) -> None:
    cli = kafka_cli(tmp_path / "cli")
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                          f'sasl.jaas.config={OAUTHBEARER_LOGIN_MODULE} required '
                          f'unsecuredLoginStringClaim_sub="carol" unsecuredLoginListClaim_scope=",kafka";\n')
    cli.run("kafka-console-producer", ["--bootstrap-server", oauth_broker.bootstrap_for(LISTENER), "--topic", "oauth",
                                        "--producer.config", str(properties)], input="from java\n", timeout=60)
    deadline = time.monotonic() + 30
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**_librdkafka(oauth_broker, "principal=alice scope=kafka"), "group.id": "java-check"})
    try:
        consumer.assign([TopicPartition("oauth", 0, 0)])
        values = []
        while b"from java" not in values and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert b"from java" in values
    finally:
        consumer.close()


def test_brokers_replicate_and_shut_down_over_oauthbearer(shared_zookeeper, tmp_path: Path) -> None:
    """Our brokers log in to each other with their own unsecured tokens (unsecuredLoginStringClaim_sub
    "admin", the required scope granted): replica fetches, AlterPartition, controller RPCs and a
    controlled shutdown all go over the OAUTHBEARER inter-broker listener."""
    from confluent_kafka import Producer

    from tests.harness.broker import BrokerCluster

    zk_connect = shared_zookeeper.connect_string_with_chroot(f"oauth-cluster-{uuid.uuid4().hex[:8]}")
    overrides = {**SETTINGS, "inter.broker.listener.name": LISTENER,
                 "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
                 "offsets.topic.replication.factor": "3", "min.insync.replicas": "2"}
    cluster = BrokerCluster(3, zk_connect, tmp_path, overrides, extra_listeners=(LISTENER,))
    try:
        cluster.start()
        cluster.brokers[0].create_topic("replicated", partitions=3, replication_factor=3)
        producer = Producer({**_librdkafka(cluster.brokers[0], "principal=alice scope=kafka"),
                             "bootstrap.servers": cluster.bootstrap_for(LISTENER), "acks": "all"})
        for i in range(300):
            producer.produce("replicated", value=f"m{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        topic = cluster.brokers[1].metadata(["replicated"]).topics[0]
        assert all(sorted(p.isr_nodes) == [0, 1, 2] for p in topic.partitions)
        assert cluster.brokers[2].stop() == 0
        assert "Controlled shutdown request returned successfully" in cluster.brokers[2].log_path.read_text()
    finally:
        cluster.stop()
        for broker in cluster.brokers:
            log = broker.log_path.read_text() if broker.log_path.exists() else ""
            assert "Failed authentication" not in log, broker.log_tail(50)


def test_the_tokens_expiry_is_the_session_lifetime(oauth_broker: BrokerProcess) -> None:
    """KIP-368 for OAUTHBEARER: SaslAuthenticate answers the token's remaining life as the session
    lifetime (no connections.max.reauth.ms set), and an expired token gets the error challenge."""
    from broker.security.oauthbearer import client_first_message
    from protocol.api_keys import ApiKey
    from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
    from tests.integration.security.test_authentication_failures import RawConnection

    def login(token: str) -> tuple[RawConnection, object]:
        connection = RawConnection(oauth_broker.bootstrap_for(LISTENER))
        handshake = connection.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        assert handshake.error_code == 0
        return connection, connection.request(ApiKey.SASL_AUTHENTICATE, 2,
                                              SaslAuthenticateRequest(auth_bytes=client_first_message(token)))

    options = {"unsecuredLoginStringClaim_sub": "dave", "unsecuredLoginListClaim_scope": ",kafka"}
    connection, answer = login(unsecured_token({**options, "unsecuredLoginLifetimeSeconds": "60"}))
    assert answer.error_code == 0 and answer.auth_bytes == b""  # type: ignore[attr-defined]
    assert 55_000 <= answer.session_lifetime_ms <= 60_000  # type: ignore[attr-defined]
    connection.close()
    connection, answer = login(unsecured_token(options, now_s=time.time() - 7200))
    assert answer.error_code == 0 and b'"status":"invalid_token"' in answer.auth_bytes  # type: ignore[attr-defined]
    refused = connection.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\x01"))
    assert refused.error_code == 58  # SASL_AUTHENTICATION_FAILED
    connection.close()


# --- KIP-768: tokens signed by an identity provider, checked against its JWKS ---------------------

JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@pytest.fixture(scope="module", params=["ours", "kafka"])
def oidc_broker(request: pytest.FixtureRequest, shared_zookeeper,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, IdentityProvider]]:
    kind = request.param
    if kind == "kafka":
        kafka_broker_or_skip()
    directory = tmp_path_factory.mktemp(f"oidc-{kind}")
    provider = IdentityProvider(directory)
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    settings = {"sasl.enabled.mechanisms": "OAUTHBEARER",
                # Kafka logs the broker itself in on every SASL listener: its own unsecured token.
                prefix + "sasl.jaas.config":
                    f'{OAUTHBEARER_LOGIN_MODULE} required unsecuredLoginStringClaim_sub="admin";',
                prefix + "sasl.server.callback.handler.class": JWKS_VALIDATOR,
                prefix + "sasl.oauthbearer.jwks.endpoint.url": f"file:{provider.jwks}",
                "sasl.oauthbearer.expected.audience": "kafka-brokers", "sasl.oauthbearer.expected.issuer": "test-idp"}
    cls = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = cls(shared_zookeeper.connect_string_with_chroot(f"oidc-{uuid.uuid4().hex[:8]}"), 0, directory / "broker",
                 settings, extra_listeners=(LISTENER,))
    broker.start()
    try:
        broker.create_topic("oidc")
        yield broker, provider
    finally:
        broker.stop()


def test_signed_tokens_from_kafka_python(oidc_broker: tuple[BrokerProcess, IdentityProvider]) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError
    from kafka.net.sasl.oauth import AbstractTokenProvider

    broker, provider = oidc_broker

    class Provider(AbstractTokenProvider):
        def __init__(self, audience: str) -> None:
            super().__init__()
            self.audience = audience

        def token(self) -> str:
            return provider.token("erin", self.audience)

    def producer(audience: str, **timeouts: int) -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=broker.bootstrap_for(LISTENER), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider(audience), **timeouts)

    accepted = producer("kafka-brokers")
    try:
        accepted.send("oidc", b"signed").get(timeout=30)
    finally:
        accepted.close()
    with pytest.raises(KafkaPythonError):  # a token for another audience
        producer("someone-else", bootstrap_timeout_ms=3000).send("oidc", b"no").get(timeout=10)


def test_signed_token_from_the_java_console_producers_file_endpoint(
        oidc_broker: tuple[BrokerProcess, IdentityProvider], tmp_path: Path) -> None:
    """Kafka's own OIDC login (OAuthBearerLoginCallbackHandler) reading its token from a file."""
    broker, provider = oidc_broker
    cli = kafka_cli(tmp_path / "cli")
    token_file = tmp_path / "token.jwt"
    token_file.write_text(provider.token("frank"))
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                          "sasl.login.callback.handler.class="
                          "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
                          f"sasl.oauthbearer.token.endpoint.url=file:{token_file}\n"
                          f"sasl.jaas.config={OAUTHBEARER_LOGIN_MODULE} required;\n")
    cli.run("kafka-console-producer", ["--bootstrap-server", broker.bootstrap_for(LISTENER), "--topic", "oidc",
                                        "--producer.config", str(properties)], input="from java\n", timeout=60)
    consumer_props = tmp_path / "consumer.properties"
    consumer_props.write_text(properties.read_text())
    done = cli.run("kafka-console-consumer", ["--bootstrap-server", broker.bootstrap_for(LISTENER), "--topic", "oidc",
                                              "--partition", "0", "--offset", "earliest", "--timeout-ms", "10000",
                                              "--consumer.config", str(consumer_props)], timeout=60, check=False)
    assert "from java" in done.stdout.splitlines(), done.stderr[-2000:]


OIDC_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def test_ours_and_kafka_log_in_to_each_other_at_an_identity_provider(shared_zookeeper, tmp_path: Path) -> None:
    """KIP-768 end to end: our broker 0 and Kafka 3.9's broker 1 in one cluster, each logging in
    to the other over OAUTHBEARER with a token from the identity provider's client credentials
    grant and checking the other's token against its JWKS; librdkafka's own OIDC login
    (``sasl.oauthbearer.method=oidc``) produces with acks=all to partitions led by either, so
    every write crosses the inter-broker logins both ways."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    kafka_broker_or_skip()
    provider = IdentityProvider(tmp_path)
    provider.add_client("broker", "broker-secret", "broker")
    provider.add_client("app", "app-secret", "app")
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    settings = {
        "sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "inter.broker.listener.name": LISTENER,
        prefix + "sasl.jaas.config": f'{OAUTHBEARER_LOGIN_MODULE} required clientId="broker" '
                                     'clientSecret="broker-secret" scope="kafka";',
        prefix + "sasl.login.callback.handler.class": OIDC_LOGIN,
        prefix + "sasl.oauthbearer.token.endpoint.url": provider.token_endpoint,
        prefix + "sasl.server.callback.handler.class": JWKS_VALIDATOR,
        prefix + "sasl.oauthbearer.jwks.endpoint.url": f"file:{provider.jwks}",
        "sasl.oauthbearer.expected.audience": "kafka-brokers", "sasl.oauthbearer.expected.issuer": "test-idp",
        "offsets.topic.replication.factor": "2", "min.insync.replicas": "2",
    }
    zk_connect = shared_zookeeper.connect_string_with_chroot(f"oidc-mixed-{uuid.uuid4().hex[:8]}")
    brokers = [BrokerProcess(zk_connect, 0, tmp_path, settings, extra_listeners=(LISTENER,)),
               KafkaJavaBroker(zk_connect, 1, tmp_path, settings, extra_listeners=(LISTENER,))]
    try:
        for broker in brokers:
            broker.start()
        brokers[0].create_topic("through-idp", partitions=2, replication_factor=2)
        client = {"bootstrap.servers": ",".join(b.bootstrap_for(LISTENER) for b in brokers),
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                  "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "app",
                  "sasl.oauthbearer.client.secret": "app-secret", "sasl.oauthbearer.scope": "kafka",
                  "sasl.oauthbearer.token.endpoint.url": provider.token_endpoint}
        producer = Producer({**client, "acks": "all"})
        for i in range(200):
            producer.produce("through-idp", value=f"m{i}".encode(), partition=i % 2)
        assert producer.flush(60) == 0
        leaders = {p.leader_id for p in brokers[0].metadata(["through-idp"]).topics[0].partitions}
        assert leaders == {0, 1}  # one partition led by each kind: replica fetches both ways
        consumer = Consumer({**client, "group.id": "idp-readers", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("through-idp", p, 0) for p in range(2)])
            values: set[bytes] = set()
            deadline = time.monotonic() + 60
            while len(values) < 200 and time.monotonic() < deadline:
                message = consumer.poll(1)
                if message is not None and message.error() is None:
                    values.add(message.value())
            assert values == {f"m{i}".encode() for i in range(200)}
        finally:
            consumer.close()
        clients = {base64.b64decode(r["authorization"].removeprefix("Basic ")).decode().split(":")[0]
                   for r in provider.requests}
        assert clients == {"broker", "app"}
    finally:
        for broker in reversed(brokers):
            broker.stop()
        provider.close()
        for broker in brokers:
            log = broker.log_path.read_text() if broker.log_path.exists() else ""
            assert "Failed authentication" not in log and "authentication failed" not in log.lower(), \
                broker.log_tail(50)
