"""The producer-state settings a Kafka 3.9 broker applies dynamically (DynamicProducerStateManagerConfig),
changed through an admin client's IncrementalAlterConfigs while the broker runs:
``transaction.partition.verification.enable`` (KIP-890: off, a transactional write to a partition never
added to the transaction is taken, which is how hanging transactions arise; on again, refused) and
``producer.id.expiration.ms`` (idle producers leave the partitions' producer state, a producer with an
open transaction stays)."""
from __future__ import annotations

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DescribeProducersRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import (
    add_partitions,
    begin,
    produce_transactional,
    unique,
    wait_for_coordinator,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "2", "producer.id.expiration.check.interval.ms": "200"}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _alter_broker_config(broker: BrokerProcess, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs SET (or DELETE for None) of the broker's own dynamic config."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    operation = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(ResourceType.BROKER, str(broker.broker_id), incremental_configs=[
        ConfigEntry(name, value, incremental_operation=operation)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _broker_config(broker: BrokerProcess, name: str) -> str:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker.broker_id))]).values()
    return future.result(30)[name].value


def _producers(broker: BrokerProcess, topic: str) -> dict[int, int]:
    """producer id -> start offset of its open transaction (-1: none), as DescribeProducers answers."""
    (partition,) = broker.request(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])])).topics[0].partitions
    assert partition.error_code == 0
    return {p.producer_id: p.current_txn_start_offset for p in partition.active_producers}


def test_transaction_verification_is_switched_at_run_time(broker: BrokerProcess) -> None:
    topic, txn = unique("orders"), unique("t")
    broker.create_topic(topic, 2)
    wait_for_coordinator(broker, txn)
    pid, epoch = begin(broker, txn)
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}
    assert produce_transactional(broker, txn, pid, epoch, topic, 1, [b"outside"]) is Errors.INVALID_TXN_STATE
    _alter_broker_config(broker, "transaction.partition.verification.enable", "false")
    try:
        # Off: the write outside the transaction is taken (and leaves partition 1 with an open transaction
        # its coordinator knows nothing of: a hanging transaction).
        assert wait_for(lambda: produce_transactional(broker, txn, pid, epoch, topic, 1, [b"outside"]) is Errors.NONE,
                        "the write outside the transaction to be taken", 30)
        assert _producers(broker, topic) == {}  # partition 0 has had no write
    finally:
        _alter_broker_config(broker, "transaction.partition.verification.enable", None)
    # On again (once the broker reports it): the next first write of a transaction to a partition is
    # checked with the coordinator.
    wait_for(lambda: _broker_config(broker, "transaction.partition.verification.enable") == "true",
             "the broker to report verification on again", 30)
    other_txn = unique("t")
    wait_for_coordinator(broker, other_txn)
    other_pid, other_epoch = begin(broker, other_txn)
    assert produce_transactional(broker, other_txn, other_pid, other_epoch, topic, 0, [b"x"]) is \
        Errors.INVALID_TXN_STATE


def test_producer_id_expiration_is_changed_at_run_time(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic, txn = unique("orders"), unique("t")
    broker.create_topic(topic, 1)
    idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    idempotent.produce(topic, b"idle soon", partition=0)
    assert idempotent.flush(30) == 0
    wait_for_coordinator(broker, txn)
    pid, epoch = begin(broker, txn)
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}
    assert produce_transactional(broker, txn, pid, epoch, topic, 0, [b"open"]) is Errors.NONE
    (idle_pid,) = set(_producers(broker, topic)) - {pid}
    assert _producers(broker, topic) == {idle_pid: -1, pid: 1}
    _alter_broker_config(broker, "producer.id.expiration.ms", "1000")  # Kafka's default is a day
    try:
        # The idle producer goes; the one with an open transaction stays however old it gets.
        wait_for(lambda: _producers(broker, topic) == {pid: 1}, "the idle producer id to expire", 30)
    finally:
        _alter_broker_config(broker, "producer.id.expiration.ms", None)
    idempotent.flush(10)
