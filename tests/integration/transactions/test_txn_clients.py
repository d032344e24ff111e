"""The transaction coordinator as librdkafka (confluent-kafka) uses it: commit and abort, a zombie fenced by
a newer producer with the same transactional id, and a transaction left open by a killed producer aborted
by its timeout so read_committed consumers move on."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.processes import die_with_parent
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import describe, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "4",
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _producer(broker: BrokerProcess, transactional_id: str, **config: object):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id, **config})


def _read_committed(broker: BrokerProcess, topic: str, expected: int, timeout: float = 60.0) -> list[bytes]:
    """Values a read_committed consumer gets from the start, once it has ``expected`` of them."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        time.sleep(0.5)  # anything beyond ``expected`` would show up meanwhile
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value())
        return values
    finally:
        consumer.close()


def test_commit_abort_and_a_fenced_zombie(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    topic, txn = unique("orders"), unique("t")
    broker.create_topic(topic, 2)
    first = _producer(broker, txn)
    first.init_transactions(30)
    first.begin_transaction()
    for i in range(6):
        first.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    first.commit_transaction(30)
    first.begin_transaction()
    first.produce(topic, b"aborted", partition=0)
    first.flush(30)
    first.abort_transaction(30)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=1)
    first.flush(30)

    second = _producer(broker, txn)
    second.init_transactions(30)  # fences the first: its open transaction is aborted under a new epoch
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    second.begin_transaction()
    second.produce(topic, b"after-fence", partition=1)
    second.commit_transaction(30)

    state = wait_for(lambda: (s := describe(broker, txn)).transaction_state == "CompleteCommit" and s,
                     "the markers of the last commit")  # EndTxn is answered once PrepareCommit is written
    assert state.producer_epoch == 2
    assert sorted(_read_committed(broker, topic, 7)) == sorted(
        [f"committed-{i}".encode() for i in range(6)] + [b"after-fence"])


PRODUCE_AND_HANG = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                         "transaction.timeout.ms": 2000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(sys.argv[3], b"left-open", partition=0)
    producer.flush(30)
    print("produced", flush=True)
    time.sleep(600)
""")


def test_a_killed_producers_transaction_is_aborted_by_its_timeout(broker: BrokerProcess) -> None:
    topic, abandoned, other = unique("orders"), unique("abandoned"), unique("t")
    broker.create_topic(topic, 1)
    hanging = subprocess.Popen([sys.executable, "-c", PRODUCE_AND_HANG, broker.bootstrap, abandoned, topic],
                               stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        assert hanging.stdout is not None and hanging.stdout.readline().strip() == "produced"
        hanging.send_signal(signal.SIGKILL)
        hanging.wait(10)
        producer = _producer(broker, other)
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"behind-the-open-one", partition=0)
        producer.commit_transaction(30)
        # The committed record sits behind the open transaction: read_committed gets it once the
        # coordinator has aborted the abandoned transaction (its 2 s timeout), never the open record.
        assert _read_committed(broker, topic, 1) == [b"behind-the-open-one"]
        state = wait_for(lambda: (s := describe(broker, abandoned)).transaction_state == "CompleteAbort" and s,
                         "the abandoned transaction to be aborted")
        assert state.producer_epoch == 1  # aborted under a bumped epoch: the dead producer is fenced
    finally:
        hanging.kill()
        hanging.wait(10)
