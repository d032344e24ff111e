"""Kafka's own ``kafka-transactions.sh`` (3.9) against the broker: list, describe, describe-producers and
find-hanging read what the transaction coordinator and the partition leaders answer; abort writes a
marker on a partition; kafka-dump-log decodes the coordinator's __transaction_state."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.coordinator.internal_topic import partition_for
from protocol.errors import Errors
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import kafka_cli
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import (
    add_partitions,
    begin,
    describe,
    end_txn,
    produce_transactional,
    unique,
    wait_for_coordinator,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _rows(output: str) -> list[list[str]]:
    """The tool's table (tab-separated, padded) without its header."""
    return [[cell.strip() for cell in line.split("\t") if cell.strip()] for line in output.splitlines()[1:]
            if line.strip()]


@pytest.mark.parametrize("broker", [{"transaction.state.log.num.partitions": "3"}], indirect=True)
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

    assert sorted(_rows(tool("list"))) == sorted([[txn, "0", str(pid), "Ongoing"], [idle, "0", str(idle_pid), "Empty"]])
    # Younger than an hour: only the id that never started a transaction passes (start time -1, as in Kafka).
    assert [row[0] for row in _rows(tool("list", "--duration-filter", "3600000"))] == [idle]
    (described,) = _rows(tool("describe", "--transactional-id", txn))
    assert described[:6] == ["0", txn, str(pid), str(epoch), "Ongoing", "60000"]
    assert described[-1] == f"{topic}-0"
    (producer,) = _rows(tool("describe-producers", "--topic", topic, "--partition", "0"))
    assert (producer[0], producer[1], producer[-1]) == (str(pid), str(epoch), "0")  # the transaction starts at 0
    # Open for longer than a zero timeout, but not hanging: its coordinator lists and describes it.
    assert _rows(tool("find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")) == []
    # abort: the tool writes an ABORT marker on the partition itself (WriteTxnMarkers to its leader).
    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    (producer,) = _rows(tool("describe-producers", "--topic", topic, "--partition", "0"))
    assert producer[-1] == "None"  # no transaction open on the partition any more

    # Kafka's DumpLogSegments decodes what the coordinator wrote to __transaction_state.
    assert end_txn(broker, txn, pid, epoch, commit=False) is Errors.NONE
    wait_for(lambda: describe(broker, txn).transaction_state == "CompleteAbort", "the abort to complete")
    (segment,) = (broker.log_dir / f"__transaction_state-{partition_for(txn, 3)}").glob("*.log")
    dumped = cli.run("kafka-dump-log", ["--files", str(segment), "--transaction-log-decoder"]).stdout
    payloads = [line.split(" payload: ")[1] for line in dumped.splitlines() if f"transactionalId={txn} payload: " in line]
    assert [p.split(",")[:3] for p in payloads] == [[f"producerId:{pid}", f"producerEpoch:{epoch}", f"state={state}"]
                                                    for state in ("Empty", "Ongoing", "PrepareAbort", "CompleteAbort")]
    assert f"partitions=[{topic}-0]" in payloads[1] and "partitions=[]" in payloads[3]
