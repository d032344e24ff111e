"""kafka-topics.sh against our broker and real Kafka: the same output for create, describe, alter
(partitions), list and delete, and the same errors."""
from __future__ import annotations

import pytest

from tests.integration.kafka_tools.tool_support import SideBySide, unique

pytestmark = pytest.mark.integration


def test_topic_lifecycle(sides: SideBySide) -> None:
    topic = unique("lifecycle")
    created = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic,
                                          "--partitions", "3", "--replication-factor", "1",
                                          "--config", "retention.ms=86400000", "--config", "max.message.bytes=64000"])
    assert created.lines() == [f"Created topic {topic}."]

    described = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic])
    assert described.lines()[0].startswith(f"Topic: {topic}\tTopicId: ID\tPartitionCount: 3\tReplicationFactor: 1\t")
    assert "retention.ms=86400000" in described.lines()[0] and "max.message.bytes=64000" in described.lines()[0]
    assert [line.split("\t")[2:5] for line in described.lines()[1:]] == [
        [f"Partition: {p}", "Leader: 0", "Replicas: 0"] for p in range(3)]

    sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--alter", "--topic", topic, "--partitions", "5"])
    altered = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic])
    assert "PartitionCount: 5" in altered.lines()[0] and len(altered.lines()) == 6

    listed = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--list", "--topic", topic])
    assert listed.lines() == [topic]
    sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--delete", "--topic", topic])
    assert sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--list", "--topic", topic]).stdout.strip() == ""


@pytest.fixture(scope="module")
def existing(sides: SideBySide) -> str:
    """A topic with two partitions and a dot in its name, on both sides."""
    topic = unique("errors.x")
    sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "2"])
    return topic


@pytest.mark.parametrize("args, message", [
    (["--create", "--topic", "bad name!"], "contains one or more characters other than ASCII alphanumerics"),
    (["--create", "--topic", "{existing}"], "already exists"),
    (["--create", "--topic", "{colliding}"], "collides with existing topics"),
    (["--create", "--topic", "{new}", "--replication-factor", "3"], "larger than available brokers: 1"),
    (["--create", "--topic", "{new}", "--config", "retention.ms=soon"], "Not a number of type LONG"),
    (["--alter", "--topic", "{existing}", "--partitions", "1"], "which is higher than the requested 1"),
    (["--describe", "--topic", "{new}"], "does not exist as expected"),
])
def test_topic_errors(sides: SideBySide, existing: str, args: list[str], message: str) -> None:
    names = {"{existing}": existing, "{colliding}": existing.replace(".", "_"), "{new}": unique("errors")}
    failed = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}",
                                         *(names.get(arg, arg) for arg in args)], stderr=True, ok=False)
    assert failed.returncode == 1 and message in failed.stdout + failed.stderr


def test_describe_filters_and_conditional_options(sides: SideBySide) -> None:
    """The options a Kafka operator reaches for besides the lifecycle: a replica assignment given by
    hand, the describe filters (overrides, ISR conditions) and --if-exists / --if-not-exists."""
    plain, tuned, absent = unique("plain"), unique("tuned"), unique("absent")
    topics = ["kafka-topics", "--bootstrap-server", "{bootstrap}"]
    sides.same(topics[0], [*topics[1:], "--create", "--topic", plain, "--replica-assignment", "0,0,0"])
    sides.same(topics[0], [*topics[1:], "--create", "--topic", tuned, "--partitions", "2",
                           "--config", "cleanup.policy=compact", "--config", "min.insync.replicas=2"])
    assert sides.same(topics[0], [*topics[1:], "--create", "--topic", plain, "--if-not-exists"]).stdout == ""
    described = sides.same(topics[0], [*topics[1:], "--describe", "--topic", plain])
    assert [line.split("\t")[3:5] for line in described.lines()[1:]] == [["Leader: 0", "Replicas: 0"]] * 3
    overrides = sides.same(topics[0], [*topics[1:], "--describe", "--topics-with-overrides", "--exclude-internal"],
                           only=f"Topic: {tuned}")  # other tests' topics with overrides may be there
    assert "Configs: min.insync.replicas=2,cleanup.policy=compact" in overrides.stdout
    for condition, listed in (("--at-min-isr-partitions", 3), ("--under-min-isr-partitions", 0),
                              ("--under-replicated-partitions", 0), ("--unavailable-partitions", 0)):
        found = sides.same(topics[0], [*topics[1:], "--describe", "--topic", plain, condition])
        assert len(found.lines()) == listed, condition
    # min.insync.replicas=2 over one replica: every partition of the tuned topic is under it
    assert len(sides.same(topics[0], [*topics[1:], "--describe", "--topic", tuned,
                                      "--under-min-isr-partitions"]).lines()) == 2
    for action in (["--describe"], ["--delete"], ["--alter", "--partitions", "4"]):
        assert sides.same(topics[0], [*topics[1:], *action, "--topic", absent, "--if-exists"]).stdout == ""
