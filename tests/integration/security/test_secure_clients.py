"""Real clients over SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512:
kafka-python, confluent-kafka, aiokafka, kcat and Kafka's Java console producer and consumer."""
from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from tests.harness.kafka_cli import kafka_cli
from tests.integration.security.security_setup import (
    java_client_properties,
    kafka_python_config,
    kafka_python_refused_quickly,
    librdkafka_config,
)

pytestmark = pytest.mark.integration

# (listener, mechanism, user)
COMBINATIONS = [("SSL", None, "-"), ("SASL_PLAINTEXT", "PLAIN", "bob"),
                ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice"), ("SASL_SSL", "SCRAM-SHA-512", "alice")]


def _topic(secure_broker, name: str) -> str:
    secure_broker.broker.create_topic(name)
    return name


def test_kafka_python(secure_broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic(secure_broker, "kafka-python")
    for listener, mechanism, user in COMBINATIONS:
        config = kafka_python_config(listener, mechanism, user, secure_broker.pki)
        producer = KafkaProducer(bootstrap_servers=secure_broker.bootstrap(listener), **config)
        producer.send(topic, f"{listener}-{mechanism}".encode()).get(15)
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=secure_broker.bootstrap("SASL_SSL"), auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, group_id="kp",
                             **kafka_python_config("SASL_SSL", "SCRAM-SHA-256", "alice", secure_broker.pki))
    values = [m.value.decode() for m in consumer]
    consumer.close()
    assert values == [f"{listener}-{mechanism}" for listener, mechanism, _ in COMBINATIONS]


def test_confluent_kafka(secure_broker) -> None:
    from confluent_kafka import Consumer, Producer

    topic = _topic(secure_broker, "confluent")
    for listener, mechanism, user in COMBINATIONS:
        config = librdkafka_config(listener, mechanism, user, secure_broker.pki)
        producer = Producer({**config, "bootstrap.servers": secure_broker.bootstrap(listener)})
        producer.produce(topic, f"{listener}-{mechanism}".encode())
        assert producer.flush(15) == 0
        consumer = Consumer({**config, "bootstrap.servers": secure_broker.bootstrap(listener),
                             "group.id": f"g-{listener}-{mechanism}", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got = []
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value().decode())
                if got[-1] == f"{listener}-{mechanism}":
                    break
        consumer.close()
        assert got and got[-1] == f"{listener}-{mechanism}", got


def test_aiokafka(secure_broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = _topic(secure_broker, "aiokafka")

    def config(listener: str, mechanism: str | None, user: str) -> dict:
        settings = kafka_python_config(listener, mechanism, user, secure_broker.pki)
        if settings.pop("ssl_cafile", None):
            settings["ssl_context"] = create_ssl_context(cafile=str(secure_broker.pki.ca_file))
        return settings

    async def run() -> list[str]:
        for listener, mechanism, user in COMBINATIONS:
            producer = AIOKafkaProducer(bootstrap_servers=secure_broker.bootstrap(listener),
                                        **config(listener, mechanism, user))
            await producer.start()
            try:
                await producer.send_and_wait(topic, f"{listener}-{mechanism}".encode())
            finally:
                await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=secure_broker.bootstrap("SSL"),
                                    auto_offset_reset="earliest", **config("SSL", None, "-"))
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=10000, max_records=10)
            return [m.value.decode() for messages in batches.values() for m in messages]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"{listener}-{mechanism}" for listener, mechanism, _ in COMBINATIONS]


def test_kcat(secure_broker) -> None:
    topic = _topic(secure_broker, "kcat")
    for listener, mechanism, user in COMBINATIONS:
        options = [arg for key, value in librdkafka_config(listener, mechanism, user, secure_broker.pki).items()
                   for arg in ("-X", f"{key}={value}")]
        base = ["kcat", "-b", secure_broker.bootstrap(listener), *options]
        subprocess.run([*base, "-P", "-t", topic], input=f"{listener}-{mechanism}\n", text=True, check=True,
                       timeout=30)
        consumed = subprocess.run([*base, "-C", "-t", topic, "-e", "-q"], capture_output=True, text=True,
                                  check=True, timeout=30)
        assert consumed.stdout.splitlines()[-1] == f"{listener}-{mechanism}"


def test_java_console_producer_and_consumer(secure_broker, tmp_path) -> None:
    cli = kafka_cli(tmp_path)
    topic = _topic(secure_broker, "java-console")
    properties = java_client_properties(tmp_path / "client.properties", "SASL_SSL", "SCRAM-SHA-512", "alice",
                                        secure_broker.pki)
    bootstrap = secure_broker.bootstrap("SASL_SSL")
    cli.run("kafka-console-producer", ["--bootstrap-server", bootstrap, "--topic", topic,
                                       "--producer.config", str(properties)], input="one\ntwo\nthree\n")
    consumed = cli.run("kafka-console-consumer", ["--bootstrap-server", bootstrap, "--topic", topic,
                                                  "--from-beginning", "--max-messages", "3",
                                                  "--consumer.config", str(properties), "--timeout-ms", "30000"])
    assert consumed.stdout.split() == ["one", "two", "three"]


def test_acl_apis_without_an_authorizer_answer_security_disabled(secure_broker) -> None:
    from protocol.errors import Errors
    from protocol.messages import DescribeAclsRequest

    response = secure_broker.broker.request(29, 1, DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1))
    assert response.error_code == Errors.SECURITY_DISABLED
    assert response.error_message == "No Authorizer is configured on the broker"


def _can_login(secure_broker, user: str, password: str, mechanism: str) -> bool:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    config = {**kafka_python_config("SASL_PLAINTEXT", mechanism, "alice", secure_broker.pki),
              "sasl_plain_username": user, "sasl_plain_password": password, **kafka_python_refused_quickly()}
    try:
        KafkaProducer(bootstrap_servers=secure_broker.bootstrap("SASL_PLAINTEXT"), request_timeout_ms=5000,
                      **config).close()
    except KafkaError:
        return False
    return True


def test_scram_users_managed_with_kafka_configs_sh(secure_broker, tmp_path) -> None:
    cli = kafka_cli(tmp_path)
    admin = java_client_properties(tmp_path / "admin.properties", "SASL_PLAINTEXT", "SCRAM-SHA-256", "admin",
                                   secure_broker.pki)
    bootstrap = ["--bootstrap-server", secure_broker.bootstrap("SASL_PLAINTEXT"), "--command-config", str(admin)]
    # Through the broker (AlterUserScramCredentials on the controller).
    cli.run("kafka-configs", [*bootstrap, "--alter", "--add-config",
                              "SCRAM-SHA-512=[password=carol-secret],SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
                              "--entity-type", "users", "--entity-name", "carol"])
    described = cli.run("kafka-configs", [*bootstrap, "--describe", "--entity-type", "users",
                                          "--entity-name", "carol"]).stdout
    assert "SCRAM-SHA-256=iterations=8192" in described and "SCRAM-SHA-512=iterations=4096" in described
    assert _can_login(secure_broker, "carol", "carol-secret", "SCRAM-SHA-512")
    assert _can_login(secure_broker, "carol", "carol-secret", "SCRAM-SHA-256")
    cli.run("kafka-configs", [*bootstrap, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                              "--entity-name", "carol"])
    assert not _can_login(secure_broker, "carol", "carol-secret", "SCRAM-SHA-512")
    # Straight to ZooKeeper, as kafka-configs.sh --zookeeper still does for SCRAM users in 3.9.
    cli.run("kafka-configs", ["--zookeeper", secure_broker.zk_connect, "--alter", "--add-config",
                              "SCRAM-SHA-256=[password=dave-secret]", "--entity-type", "users", "--entity-name", "dave"])
    deadline = time.monotonic() + 15
    while not _can_login(secure_broker, "dave", "dave-secret", "SCRAM-SHA-256"):
        assert time.monotonic() < deadline, "the broker never picked up dave's credential"
        time.sleep(0.2)
