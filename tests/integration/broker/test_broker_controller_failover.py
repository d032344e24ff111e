"""The controller's duties with real broker processes: failover, old-style topics, ZooKeeper outages."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import InitProducerIdRequest
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.kafka_broker import KafkaJavaBroker, kafka_broker_or_skip
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer

SESSION_TIMEOUT_S = 6  # zookeeper.session.timeout.ms in the harness's broker defaults



def _round_trip(bootstrap: str, topic: str, values: list[bytes], expect: int | None = None) -> list[bytes]:
    """Produce ``values`` to partition 0 (acks=all, idempotent); read ``expect`` records from offset 0."""
    expect = len(values) if expect is None else expect
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert producer.flush(30) == 0 and errors == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < expect and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        return got
    finally:
        consumer.close()


def test_sigkill_of_the_controller_elects_another_and_moves_its_leaderships(cluster3: BrokerCluster) -> None:
    topic = f"f-{uuid.uuid4().hex[:8]}"
    any_broker = cluster3.brokers[0]
    any_broker.create_topic(topic, partitions=6, replication_factor=3)
    any_broker.wait_for_leaders(topic, 6)
    controller_id = any_broker.metadata().controller_id
    victim = cluster3.brokers[controller_id]
    led = {p.partition_index for p in any_broker.metadata([topic]).topics[0].partitions
           if p.leader_id == controller_id}
    assert led, "the controller leads some partitions (leadership is spread over three brokers)"
    survivor = next(b for b in cluster3.brokers if b is not victim)

    killed_at = time.monotonic()
    victim.kill()
    new_controller = wait_for(lambda: (c := survivor.metadata().controller_id) not in (-1, controller_id) and c,
                           "a new controller", SESSION_TIMEOUT_S + 10)
    assert time.monotonic() - killed_at < SESSION_TIMEOUT_S + 10
    assert new_controller in {b.broker_id for b in cluster3.brokers if b is not victim}

    def moved() -> bool:
        partitions = survivor.metadata([topic]).topics[0].partitions
        return all(p.leader_id not in (controller_id, -1) and controller_id not in p.isr_nodes
                   for p in partitions if p.partition_index in led)

    wait_for(moved, "leadership of the dead controller's partitions to move", 15)
    # Every broker left agrees, and ZooKeeper's /controller says the same.
    views = {b.broker_id: b.metadata().controller_id for b in cluster3.brokers if b is not victim}
    assert set(views.values()) == {new_controller}


def test_topic_written_directly_to_zookeeper_is_picked_up_and_served(broker: BrokerProcess) -> None:
    """As `kafka-topics --zookeeper` used to create topics: only /brokers/topics/<t>, version 1."""
    topic = f"legacy-{uuid.uuid4().hex[:8]}"
    hosts, _, chroot = broker.zk_connect.partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=15)
    try:
        zk.create(f"/{chroot}/brokers/topics/{topic}",
                  json.dumps({"version": 1, "partitions": {"0": [broker.broker_id]}}).encode())
        broker.wait_for_leaders(topic, 1)
        state, _ = zk.get(f"/{chroot}/brokers/topics/{topic}/partitions/0/state")
        assert json.loads(state)["leader"] == broker.broker_id
        assignment, _ = zk.get(f"/{chroot}/brokers/topics/{topic}")
        assert json.loads(assignment).get("topic_id"), "the controller gives the topic an id"
    finally:
        zk.stop()
        zk.close()
    values = [f"m{i}".encode() for i in range(20)]
    assert _round_trip(broker.bootstrap, topic, values) == values


def test_brokers_keep_serving_while_zookeeper_is_down(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    broker = BrokerProcess(zookeeper.connect_string_with_chroot("outage"), 0, tmp_path)
    broker.start()
    try:
        topic = "survives-outage"
        broker.create_topic(topic, partitions=1, replication_factor=1)
        broker.wait_for_leaders(topic, 1)
        before = [f"before-{i}".encode() for i in range(10)]
        assert _round_trip(broker.bootstrap, topic, before) == before

        zookeeper.stop()
        try:
            # Longer than the session timeout: the broker serves from its metadata cache.
            time.sleep(SESSION_TIMEOUT_S + 1)
            during = [f"during-{i}".encode() for i in range(10)]
            assert _round_trip(broker.bootstrap, topic, during, expect=20) == before + during
        finally:
            zookeeper.start()

        # Back in ZooKeeper: the broker re-registers and admin operations work again.
        other = "after-outage"
        wait_for(lambda: _try_create(broker, other), "topic creation after the outage", 30)
        after = [f"after-{i}".encode() for i in range(5)]
        assert _round_trip(broker.bootstrap, other, after) == after
    finally:
        broker.stop()


@pytest.mark.parametrize("kind", ["ours", "kafka"])
def test_init_producer_id_without_zookeeper_is_retriable(zookeeper: ZooKeeperServer, tmp_path: Path,
                                                          kind: str) -> None:
    """A broker with no producer id block that cannot reach ZooKeeper answers InitProducerId with
    COORDINATOR_LOAD_IN_PROGRESS, as Kafka 3.9 (run here side by side) does until it has a block (the
    Java producer takes UNKNOWN_SERVER_ERROR there as fatal and fails every send); with ZooKeeper
    back, the same request gets an id."""
    if kind == "kafka":
        kafka_broker_or_skip()
    make = BrokerProcess if kind == "ours" else KafkaJavaBroker
    broker = make(zookeeper.connect_string_with_chroot(f"pids-{kind}"), 0, tmp_path)
    broker.start()
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                    producer_epoch=-1)
    try:
        zookeeper.stop()
        try:
            answer = broker.request(ApiKey.INIT_PRODUCER_ID, 4, request, timeout=30)
            assert (answer.error_code, answer.producer_id) == (Errors.COORDINATOR_LOAD_IN_PROGRESS, -1)
        finally:
            zookeeper.start()

        def gets_an_id() -> bool:
            answer = broker.request(ApiKey.INIT_PRODUCER_ID, 4, request, timeout=30)
            assert answer.error_code in (Errors.NONE, Errors.COORDINATOR_LOAD_IN_PROGRESS), Errors(answer.error_code)
            return answer.error_code == Errors.NONE and answer.producer_id >= 0
        wait_for(gets_an_id, "a producer id once ZooKeeper is back", 60)
    finally:
        broker.stop()


def _try_create(broker: BrokerProcess, topic: str) -> bool:
    """CreateTopics through the admin API, which needs the controller and ZooKeeper."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # must outlive the future
    future = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
    try:
        future.result(15)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return True
        return False  # e.g. NOT_CONTROLLER while the controller is re-elected after the outage
    return True
