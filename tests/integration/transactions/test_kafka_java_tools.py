"""Kafka 3.9's own Java tools against the broker (one broker for the module).

``kafka-transactions.sh``: list, describe, describe-producers and find-hanging read what the
transaction coordinator and the partition leaders answer; a hanging transaction (a transactional write
the coordinator never heard of, possible here because the broker runs with
``transaction.partition.verification.enable=false``, as brokers before KIP-890 did) is found and
aborted, after which read_committed consumers go on; kafka-dump-log decodes __transaction_state.
``kafka-producer-perf-test.sh`` with a transactional id commits every ``--transaction-duration-ms``,
and the Java console consumer with ``--isolation-level read_committed`` reads exactly the committed
records (with read_uncommitted, the aborted ones too)."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.coordinator.internal_topic import partition_for
from protocol.errors import Errors
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import kafka_cli
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    add_partitions,
    begin,
    describe,
    end_txn,
    latest_offset,
    produce_transactional,
    unique,
    wait_for_coordinator,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TXN_PARTITIONS = 3
BROKER_OVERRIDES = {"transaction.state.log.num.partitions": str(TXN_PARTITIONS),
                    "transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _rows(output: str) -> list[list[str]]:
    """The tool's table (tab-separated, padded) without its header."""
    return [[cell.strip() for cell in line.split("\t") if cell.strip()] for line in output.splitlines()[1:]
            if line.strip()]


def test_kafka_transactions_tool_reads_the_coordinator(broker: BrokerProcess, tmp_path: Path) -> None:
    cli = kafka_cli(tmp_path)
    topic, txn, idle = unique("orders"), unique("t"), unique("idle")
    broker.create_topic(topic, 2)
    wait_for_coordinator(broker, txn)
    pid, epoch = begin(broker, txn)
    idle_pid, _ = begin(broker, idle)
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}
    assert produce_transactional(broker, txn, pid, epoch, topic, 0, [b"a", b"b"]) is Errors.NONE

    def tool(*args: str) -> str:
        return cli.run("kafka-transactions", ["--bootstrap-server", broker.bootstrap, *args]).stdout

    ours = (txn, idle)  # other tests of the module have theirs
    assert sorted(r for r in _rows(tool("list")) if r[0] in ours) == sorted(
        [[txn, "0", str(pid), "Ongoing"], [idle, "0", str(idle_pid), "Empty"]])
    # Younger than an hour: only the id that never started a transaction passes (start time -1, as in Kafka).
    assert [row[0] for row in _rows(tool("list", "--duration-filter", "3600000")) if row[0] in ours] == [idle]
    (described,) = _rows(tool("describe", "--transactional-id", txn))
    assert described[:6] == ["0", txn, str(pid), str(epoch), "Ongoing", "60000"]
    assert described[-1] == f"{topic}-0"
    (producer,) = _rows(tool("describe-producers", "--topic", topic, "--partition", "0"))
    assert (producer[0], producer[1], producer[-1]) == (str(pid), str(epoch), "0")  # the transaction starts at 0
    # Open for longer than a zero timeout, but not hanging: its coordinator lists and describes it.
    assert _rows(tool("find-hanging", "--topic", topic, "--max-transaction-timeout", "0")) == []
    # abort: the tool writes an ABORT marker on the partition itself (WriteTxnMarkers to its leader).
    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    (producer,) = _rows(tool("describe-producers", "--topic", topic, "--partition", "0"))
    assert producer[-1] == "None"  # no transaction open on the partition any more

    # Kafka's DumpLogSegments decodes what the coordinator wrote to __transaction_state.
    assert end_txn(broker, txn, pid, epoch, commit=False) is Errors.NONE
    wait_for(lambda: describe(broker, txn).transaction_state == "CompleteAbort", "the abort to complete")
    (segment,) = (broker.log_dir / f"__transaction_state-{partition_for(txn, TXN_PARTITIONS)}").glob("*.log")
    dumped = cli.run("kafka-dump-log", ["--files", str(segment), "--transaction-log-decoder"]).stdout
    payloads = [line.split(" payload: ")[1] for line in dumped.splitlines() if f"transactionalId={txn} payload: " in line]
    assert [p.split(",")[:3] for p in payloads] == [[f"producerId:{pid}", f"producerEpoch:{epoch}", f"state={state}"]
                                                    for state in ("Empty", "Ongoing", "PrepareAbort", "CompleteAbort")]
    assert f"partitions=[{topic}-0]" in payloads[1] and "partitions=[]" in payloads[3]


def test_a_hanging_transaction_is_found_and_aborted(broker: BrokerProcess, tmp_path: Path) -> None:
    """A producer's transaction ends (abort) but one partition it wrote to without adding it never gets
    a marker: that partition's last stable offset is stuck until kafka-transactions aborts it there."""
    cli = kafka_cli(tmp_path)
    topic, txn = unique("orders"), unique("t")
    broker.create_topic(topic, 2)
    wait_for_coordinator(broker, txn)
    pid, epoch = begin(broker, txn)
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}
    assert produce_transactional(broker, txn, pid, epoch, topic, 0, [b"added"]) is Errors.NONE
    assert produce_transactional(broker, txn, pid, epoch, topic, 1, [b"never added"]) is Errors.NONE  # no KIP-890
    assert end_txn(broker, txn, pid, epoch, commit=False) is Errors.NONE
    wait_for(lambda: describe(broker, txn).transaction_state == "CompleteAbort", "the abort to complete")
    assert latest_offset(broker, topic, READ_COMMITTED, partition=0) == 2  # the record and its marker
    assert (latest_offset(broker, topic, READ_COMMITTED, partition=1),
            latest_offset(broker, topic, READ_UNCOMMITTED, partition=1)) == (0, 1)  # stuck at the open write

    def tool(*args: str) -> str:
        return cli.run("kafka-transactions", ["--bootstrap-server", broker.bootstrap, *args]).stdout

    # Topic, Partition, ProducerId, ProducerEpoch, CoordinatorEpoch, StartOffset, LastTimestamp, Duration(min)
    (hanging,) = _rows(tool("find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0"))
    assert hanging[:6] == [topic, "1", str(pid), str(epoch), "-1", "0"]
    assert _rows(tool("find-hanging", "--topic", topic, "--partition", "0", "--max-transaction-timeout", "0")) == []
    tool("abort", "--topic", topic, "--partition", "1", "--start-offset", "0")
    assert _rows(tool("find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")) == []
    assert latest_offset(broker, topic, READ_COMMITTED, partition=1) == 2  # the tool's ABORT marker is there
    (producer,) = _rows(tool("describe-producers", "--topic", topic, "--partition", "1"))
    assert (producer[0], producer[1], producer[-1]) == (str(pid), str(epoch), "None")


def _produce_committed_and_aborted(broker: BrokerProcess, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("java-read")})
    producer.init_transactions(30)
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{'committed' if commit else 'aborted'}-{i}".encode())
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def test_java_producer_perf_test_and_console_consumer(broker: BrokerProcess, tmp_path: Path) -> None:
    cli = kafka_cli(tmp_path)
    perf_topic, mixed_topic = unique("perf"), unique("mixed")
    broker.create_topic(perf_topic, 2)
    broker.create_topic(mixed_topic, 1)
    perf_txn = unique("perf-test")
    wait_for_coordinator(broker, perf_txn)
    # Kafka's Java producer, transactional: a commit every 100 ms and one for the last records.
    done = cli.run("kafka-producer-perf-test", [
        "--topic", perf_topic, "--num-records", "20000", "--record-size", "100", "--throughput", "-1",
        "--transactional-id", perf_txn, "--transaction-duration-ms", "100",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}"])
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("20000 records sent"), done.stdout
    assert wait_for(lambda: describe(broker, perf_txn).transaction_state == "CompleteCommit" and 1,
                    "the perf test's last commit to complete")
    _produce_committed_and_aborted(broker, mixed_topic)

    def console_consumer(topic: str, isolation: str, expected: int) -> list[str]:
        read = cli.run("kafka-console-consumer", [
            "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
            "--isolation-level", isolation, "--max-messages", str(expected), "--timeout-ms", "20000"])
        return read.stdout.splitlines()

    perf_read = console_consumer(perf_topic, "read_committed", 20000)
    assert len(perf_read) == 20000 and all(len(line) == 100 for line in perf_read)
    committed = [f"committed-{i}" for i in range(5)] * 2
    assert sorted(console_consumer(mixed_topic, "read_committed", 10)) == sorted(committed)
    everything = console_consumer(mixed_topic, "read_uncommitted", 15)
    assert sorted(everything) == sorted(committed + [f"aborted-{i}" for i in range(5)])
