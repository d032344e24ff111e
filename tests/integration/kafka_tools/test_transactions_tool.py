"""Transactions through Kafka's tools, against our broker and real Kafka: a transactional
kafka-producer-perf-test, then kafka-transactions.sh list, describe, describe-producers and
find-hanging, and a read_committed console consumer."""
from __future__ import annotations

import re

import pytest

from tests.integration.kafka_tools.tool_support import SideBySide, unique

pytestmark = pytest.mark.integration


def _table(output: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated table as rows of column -> value."""
    header, *rows = [[cell.strip() for cell in line.split("\t")] for line in output.splitlines() if line.strip()]
    return [dict(zip(header, row)) for row in rows]


def test_transactions(sides: SideBySide) -> None:
    topic, transactional_id = unique("transactions"), unique("perf-tx")
    sides.create_topic(topic)
    produced = sides.run("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", "300", "--record-size", "50", "--throughput", "-1",
        "--transactional-id", transactional_id, "--transaction-duration-ms", "50",
        "--producer-props", "bootstrap.servers={bootstrap}"])
    for outcome in produced:
        assert outcome.returncode == 0, outcome.stderr
        assert re.match(r"^300 records sent, ", outcome.lines()[-1]), outcome.stdout

    listed = sides.run("kafka-transactions", ["--bootstrap-server", "{bootstrap}", "list"])
    ours, kafka = ([row for row in _table(o.stdout) if row["TransactionalId"] == transactional_id] for o in listed)
    assert [(r["Coordinator"], r["TransactionState"]) for r in ours] == \
        [(r["Coordinator"], r["TransactionState"]) for r in kafka] == [("0", "CompleteCommit")]

    described = sides.run("kafka-transactions", ["--bootstrap-server", "{bootstrap}", "describe",
                                                 "--transactional-id", transactional_id])
    # Producer ids differ with what each cluster served before; start times and durations too.
    same_columns = ("CoordinatorId", "TransactionalId", "ProducerEpoch", "TransactionState", "TransactionTimeoutMs",
                    "TopicPartitions")
    ours, kafka = ([{c: row[c] for c in same_columns} for row in _table(o.stdout)] for o in described)
    assert ours == kafka and ours[0]["TransactionState"] == "CompleteCommit"

    producers = sides.run("kafka-transactions", ["--bootstrap-server", "{bootstrap}", "describe-producers",
                                                 "--topic", topic, "--partition", "0"])
    ours, kafka = ([(row["ProducerEpoch"], row["LastSequence"], row["CurrentTransactionStartOffset"])
                    for row in _table(o.stdout)] for o in producers)
    assert ours == kafka == [("0", "299", "None")]

    sides.same("kafka-transactions", ["--bootstrap-server", "{bootstrap}", "find-hanging", "--broker-id", "0"])
    committed = sides.same("kafka-console-consumer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                                     "--from-beginning", "--max-messages", "300", "--timeout-ms", "30000",
                                                     "--isolation-level", "read_committed"])
    assert len(committed.lines()) == 300
