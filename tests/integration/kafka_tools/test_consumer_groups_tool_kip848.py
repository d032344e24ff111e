"""Kafka 3.9's kafka-consumer-groups.sh on a KIP-848 consumer group: list, describe with offsets and
lag, members, reset and delete, as Kafka's tool works on Kafka 4's groups."""
from __future__ import annotations

from typing import Any

from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import produce
from tests.integration.kafka_tools.tool_support import create_topic, unique


def _consumer(broker: BrokerProcess, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})


def test_consumer_groups_tool_lists_describes_resets_and_deletes(cli: KafkaCli, ours: BrokerProcess) -> None:
    topic, group = unique("cg848"), unique("cg848")
    create_topic([ours], topic, partitions=2)
    produce(ours.bootstrap, topic, 2, 5)
    consumer = _consumer(ours, group)
    tool = ["--bootstrap-server", ours.bootstrap]
    try:
        consumer.subscribe([topic])
        read = []
        wait_for(lambda: (m := consumer.poll(0.2)) is not None and read.append(m) is None and len(read) >= 10
                 or len(read) >= 10, "every record", 60)
        consumer.commit(asynchronous=False)
        listed = cli.run("kafka-consumer-groups", [*tool, "--list"]).stdout.split()
        assert group in listed
        described = cli.run("kafka-consumer-groups", [*tool, "--describe", "--group", group]).stdout
        rows = [line.split() for line in described.splitlines() if line.startswith(group)]
        assert sorted((r[1], r[2], r[3], r[4], r[5]) for r in rows) == [
            (topic, "0", "5", "5", "0"), (topic, "1", "5", "5", "0")]
        members = cli.run("kafka-consumer-groups", [*tool, "--describe", "--group", group, "--members"]).stdout
        assert "#PARTITIONS" in members and any(line.startswith(group) for line in members.splitlines())
        refused = cli.run("kafka-consumer-groups", [*tool, "--reset-offsets", "--group", group, "--topic", topic,
                                                    "--to-earliest", "--execute"], check=False)
        assert "inactive" in refused.stdout + refused.stderr
    finally:
        consumer.close()
    def inactive() -> bool:
        done = cli.run("kafka-consumer-groups", [*tool, "--describe", "--group", group])
        return "has no active members" in done.stdout + done.stderr  # the tool says it on stderr

    wait_for(inactive, "the member gone", 60)
    cli.run("kafka-consumer-groups", [*tool, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "2",
                                      "--execute"])
    described = cli.run("kafka-consumer-groups", [*tool, "--describe", "--group", group]).stdout
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert sorted((r[2], r[3], r[5]) for r in rows) == [("0", "2", "3"), ("1", "2", "3")]  # offset 2, lag 3
    deleted = cli.run("kafka-consumer-groups", [*tool, "--delete", "--group", group]).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
    assert group not in cli.run("kafka-consumer-groups", [*tool, "--list"]).stdout.split()
