"""SASL listeners configured the way Kafka's documentation starts: a static JAAS file named in
KAFKA_OPTS (-Djava.security.auth.login.config) instead of sasl.jaas.config; ours and Kafka 3.9's side
by side, the listener's own context taking precedence over KafkaServer as in Kafka's JaasContext."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS = f"""
/* the listener's context: what Kafka's JaasContext takes first */
sasl_plaintext.KafkaServer {{
  {PLAIN_MODULE} required
  username="admin" password="admin-secret"
  user_admin="admin-secret" user_bob="bob-secret";
}};
// the broker-wide context, for listeners without their own
KafkaServer {{
  {PLAIN_MODULE} required username="admin" password="admin-secret" user_alice="alice-secret";
}};
"""


def _logs_in(broker: BrokerProcess, user: str, password: str, topic: str) -> bool:
    from confluent_kafka import Consumer, Producer, TopicPartition

    settings = {"bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": password}
    failures: list[str] = []
    delivered: list[bool] = []
    producer = Producer({**settings, "message.timeout.ms": 15000,
                         "error_cb": lambda error: failures.append(error.str())})
    producer.produce(topic, user.encode(), on_delivery=lambda error, _: delivered.append(error is None))
    deadline = time.monotonic() + 20
    while not delivered and not failures and time.monotonic() < deadline:  # a refused login: error_cb at once
        producer.poll(0.1)
    if failures or delivered != [True]:
        return False
    consumer = Consumer({**settings, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(15)
        return message is not None and message.error() is None
    finally:
        consumer.close()


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_sasl_listeners_take_their_users_from_the_jaas_file_in_kafka_opts(kind: str, zk_connect: str,
                                                                          tmp_path: Path) -> None:
    if kind == "kafka":
        kafka_broker_or_skip()
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(JAAS)
    cls: Callable[..., BrokerProcess] = BrokerProcess if kind == "ours" else KafkaJavaBroker
    # the brokers' own connections (the controller's to this broker) log in over SASL too
    broker = cls(zk_connect, 0, tmp_path / kind, {"sasl.enabled.mechanisms": "PLAIN",
                                                 "inter.broker.listener.name": "SASL_PLAINTEXT",
                                                 "sasl.mechanism.inter.broker.protocol": "PLAIN"},
                 extra_listeners=("SASL_PLAINTEXT",))
    broker.extra_env["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={jaas}"
    broker.start()
    try:
        broker.create_topic("jaas-file")
        assert _logs_in(broker, "bob", "bob-secret", "jaas-file")
        assert not _logs_in(broker, "alice", "alice-secret", "jaas-file")  # only in the broker-wide context
        assert not _logs_in(broker, "bob", "wrong", "jaas-file")
    finally:
        broker.stop()
