"""kafka-configs.sh against our broker and real Kafka: topic overrides, per-broker dynamic configs
and the cluster-wide broker defaults (--entity-default), added, described (also --all, every
config with its synonyms) and deleted, and the errors for what may not be set."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.kafka_tools.tool_support import SideBySide, unique

pytestmark = pytest.mark.integration

# Each side's broker has its own ZooKeeper chroot; --describe --all shows zookeeper.connect.
ZK_CHROOT = (r"127\.0\.0\.1:\d+/(ours|kafka)-[0-9a-f]{12}", "ZOOKEEPER")
# The keys of what Kafka 4 brings and this broker serves (KIP-848, KIP-932): Kafka 3.9 knows them
# with other defaults or not at all; they are compared with Kafka 4.2's defaults instead.
KAFKA_4_GROUP_KEYS = (r"^  (group\.consumer\.|group\.share\.|share\.coordinator\.|"
                      r"group\.coordinator\.rebalance\.protocols=).*\n", "")


def _configs(*args: str) -> list[str]:
    return ["--bootstrap-server", "{bootstrap}", *args]


def test_topic_overrides(sides: SideBySide) -> None:
    topic = unique("configs")
    sides.create_topic(topic)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    added = sides.same("kafka-configs", _configs(*entity, "--alter", "--add-config",
                                                 "retention.ms=3600000,cleanup.policy=[compact,delete]"))
    assert added.lines() == [f"Completed updating config for topic {topic}."]
    described = sides.same("kafka-configs", _configs(*entity, "--describe"))
    assert described.lines() == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}",
    ]
    every = sides.same("kafka-configs", _configs(*entity, "--describe", "--all"))
    assert len(every.lines()) == 1 + 36  # every topic config of Kafka 3.9
    assert "  local.retention.ms=-2 sensitive=false synonyms={DEFAULT_CONFIG:log.local.retention.ms=-2}" in every.lines()
    listed = sides.same("kafka-topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic])
    assert listed.lines()[0].endswith("Configs: cleanup.policy=compact,delete,retention.ms=3600000")

    sides.same("kafka-configs", _configs(*entity, "--alter", "--delete-config", "retention.ms"))
    assert len(sides.same("kafka-configs", _configs(*entity, "--describe")).lines()) == 2

    for bad in ("retention.ms=soon", "cleanup.policy=[compact,shred]"):
        sides.same("kafka-configs", _configs(*entity, "--alter", "--add-config", bad), stderr=True, ok=False)


def test_per_broker_configs(sides: SideBySide) -> None:
    entity = ("--entity-type", "brokers", "--entity-name", "0")
    try:
        sides.same("kafka-configs", _configs(*entity, "--alter", "--add-config",
                                             "log.cleaner.backoff.ms=20000,message.max.bytes=2000000"))
        described = sides.same("kafka-configs", _configs(*entity, "--describe"))
        assert described.lines() == [
            "Dynamic configs for broker 0 are:",
            "  log.cleaner.backoff.ms=20000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=20000, "
            "DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}",
            "  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}",
        ]
        every = sides.same("kafka-configs", _configs(*entity, "--describe", "--all"),
                           normalise=[ZK_CHROOT, KAFKA_4_GROUP_KEYS])
        assert len(every.lines()) > 280  # Kafka's every broker config, known to us or not (less the group keys)
        ours = sides.run_one(0, "kafka-configs", _configs(*entity, "--describe", "--all")).stdout
        assert "  group.coordinator.rebalance.protocols=classic,consumer " in ours
        assert "  group.consumer.migration.policy=bidirectional " in ours
        for bad in ("log.dirs=/elsewhere", "log.cleaner.threads=-1"):
            sides.same("kafka-configs", _configs(*entity, "--alter", "--add-config", bad), stderr=True, ok=False)
    finally:
        sides.same("kafka-configs", _configs(*entity, "--alter", "--delete-config",
                                             "log.cleaner.backoff.ms,message.max.bytes"))
    assert sides.same("kafka-configs", _configs(*entity, "--describe")).lines() == ["Dynamic configs for broker 0 are:"]


@pytest.fixture
def broker_defaults(sides: SideBySide) -> Iterator[tuple[str, ...]]:
    """The cluster-wide broker defaults, left as they were found."""
    entity = ("--entity-type", "brokers", "--entity-default")
    try:
        yield entity
    finally:
        sides.run("kafka-configs", _configs(*entity, "--alter", "--delete-config", "log.retention.ms,log.segment.bytes"))


def test_broker_defaults(sides: SideBySide, broker_defaults: tuple[str, ...]) -> None:
    added = sides.same("kafka-configs", _configs(*broker_defaults, "--alter", "--add-config",
                                                 "log.retention.ms=7200000,log.segment.bytes=50000000"))
    assert added.lines() == ["Completed updating default config for brokers in the cluster."]
    described = sides.same("kafka-configs", _configs(*broker_defaults, "--describe"))
    assert described.lines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}",
        "  log.segment.bytes=50000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=50000000}",
    ]
    # A topic without overrides takes them, and says where they come from.
    topic = unique("defaults")
    sides.create_topic(topic)
    every = sides.same("kafka-configs", _configs("--entity-type", "topics", "--entity-name", topic,
                                                 "--describe", "--all"))
    assert ("  segment.bytes=50000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=50000000, "
            "DEFAULT_CONFIG:log.segment.bytes=1073741824}") in every.lines()
    sides.same("kafka-configs", _configs(*broker_defaults, "--alter", "--add-config", "listeners=PLAINTEXT://:1"),
               stderr=True, ok=False)
