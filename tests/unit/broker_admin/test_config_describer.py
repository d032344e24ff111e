from __future__ import annotations

import pytest

from broker.admin.config_describer import ConfigSource, describe_broker, describe_topic, kafka_map_order
from broker.admin.dynamic_broker_config import DynamicBrokerConfig, DynamicConfigError
from broker.config import KafkaConfig

STATIC = {"broker.id": "0", "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x", "log.retention.hours": "24",
          "num.io.threads": "4", "custom.key": "kept"}


def _dyn() -> DynamicBrokerConfig:
    return DynamicBrokerConfig(KafkaConfig(STATIC))


def _by_name(entries):  # type: ignore[no-untyped-def]
    return {e.name: e for e in entries}


def test_topic_entries_follow_overrides_then_broker_layers() -> None:
    dyn = _dyn()
    dyn.defaults = {"log.segment.bytes": "2000000"}
    dyn.per_broker = {"log.retention.ms": "5000"}
    entries = _by_name(describe_topic({"cleanup.policy": "compact"}, dyn))
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.source) for s in entries["cleanup.policy"].synonyms] == [
        ("cleanup.policy", ConfigSource.DYNAMIC_TOPIC_CONFIG), ("log.cleanup.policy", ConfigSource.DEFAULT_CONFIG)]
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "2000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entries["remote.storage.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert all(not e.read_only for e in entries.values())


def test_topic_retention_from_static_hours() -> None:
    entries = _by_name(describe_topic({}, _dyn(), names={"retention.ms"}))
    assert list(entries) == ["retention.ms"]
    # Kafka drops synonyms listed before the primary name: log.retention.ms is set nowhere.
    assert (entries["retention.ms"].value, entries["retention.ms"].source, entries["retention.ms"].synonyms) == (
        str(24 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG, [])


def test_broker_entries() -> None:
    dyn = _dyn()
    dyn.per_broker = {"num.io.threads": "6"}
    entries = _by_name(describe_broker(dyn, per_broker=True))
    assert (entries["num.io.threads"].value, entries["num.io.threads"].source, entries["num.io.threads"].read_only) == (
        "6", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert [s.source for s in entries["num.io.threads"].synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]
    assert (entries["log.dirs"].source, entries["log.dirs"].read_only) == (ConfigSource.STATIC_BROKER_CONFIG, True)
    assert entries["log.roll.ms"].value is None
    # Kafka hides the value of a key it does not know (it might be a password)
    assert (entries["custom.key"].value, entries["custom.key"].is_sensitive) == (None, True)
    assert entries["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG


def test_cluster_default_entries_only_show_dynamic_defaults() -> None:
    dyn = _dyn()
    dyn.defaults = {"log.retention.bytes": "100"}
    (entry,) = describe_broker(dyn, per_broker=False)
    assert (entry.name, entry.value, entry.source) == ("log.retention.bytes", "100", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s.source for s in entry.synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]


def test_dynamic_validation() -> None:
    dyn = _dyn()
    dyn.validate({"log.retention.bytes": "5", "unknown.custom": "x"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match=r"Cannot update these configs dynamically: Set\(log.dirs\)"):
        dyn.validate({"log.dirs": "/y"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match="broker id must be specified"):
        dyn.validate({"listeners": "PLAINTEXT://:9093"}, per_broker=False)
    with pytest.raises(DynamicConfigError, match="Invalid value x for configuration num.io.threads"):
        dyn.validate({"num.io.threads": "x"}, per_broker=True)


def test_apply_updates_the_live_config_and_falls_back_to_static() -> None:
    config = KafkaConfig(STATIC)
    dyn = DynamicBrokerConfig(config)
    assert dyn.apply("0", {"num.io.threads": "9"}) == {"num.io.threads"}
    assert config.num_io_threads == 9
    assert dyn.apply("<default>", {"num.io.threads": "2"}) == set()
    assert dyn.apply("0", {}) == {"num.io.threads"}
    assert config.num_io_threads == 2
    assert dyn.apply("<default>", {}) == {"num.io.threads"}
    assert config.num_io_threads == 4
    assert dyn.apply("7", {"num.io.threads": "1"}) == set()


def test_broker_config_change_reaches_the_logs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from broker.admin.dynamic_broker_config import on_broker_config_change
    from storage.log_config import broker_defaults
    from storage.log_manager import LogManager

    config = KafkaConfig(STATIC)
    log_manager = LogManager([str(tmp_path)], broker_defaults(config.values()))
    log_manager.startup()
    try:
        plain = log_manager.get_or_create_log("plain", 0)
        tuned = log_manager.get_or_create_log("tuned", 0, {"retention.bytes": "7"})
        services = SimpleNamespace(config=config, log_manager=log_manager,
                                   dynamic_config=DynamicBrokerConfig(config))
        on_broker_config_change(services, "<default>", {"log.retention.bytes": "1000"})  # type: ignore[arg-type]
        assert config.log_retention_bytes == 1000
        assert plain.config.retention_bytes == 1000
        assert tuned.config.retention_bytes == 7
        on_broker_config_change(services, "0", {"log.retention.bytes": "2000"})  # type: ignore[arg-type]
        assert plain.config.retention_bytes == 2000
    finally:
        log_manager.shutdown()


# The order of a Kafka 3.9.0 broker's DescribeConfigs answer for a topic, as recorded from one.
KAFKA_TOPIC_CONFIG_ORDER = [
    "compression.type", "remote.log.delete.on.disable", "leader.replication.throttled.replicas",
    "remote.storage.enable", "message.downconversion.enable", "min.insync.replicas", "segment.jitter.ms",
    "remote.log.copy.disable", "local.retention.ms", "cleanup.policy", "flush.ms",
    "follower.replication.throttled.replicas", "compression.lz4.level", "segment.bytes", "retention.ms",
    "compression.gzip.level", "flush.messages", "compression.zstd.level", "message.format.version",
    "max.compaction.lag.ms", "file.delete.delay.ms", "max.message.bytes", "min.compaction.lag.ms",
    "message.timestamp.type", "local.retention.bytes", "preallocate", "min.cleanable.dirty.ratio",
    "index.interval.bytes", "unclean.leader.election.enable", "retention.bytes", "delete.retention.ms",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "segment.ms",
    "message.timestamp.difference.max.ms", "segment.index.bytes",
]


def test_entries_come_in_kafkas_order() -> None:
    assert kafka_map_order(sorted(KAFKA_TOPIC_CONFIG_ORDER)) == KAFKA_TOPIC_CONFIG_ORDER
    assert [e.name for e in describe_topic({}, _dyn())] == KAFKA_TOPIC_CONFIG_ORDER


def test_a_broker_describes_every_kafka_config_and_hides_unknown_values() -> None:
    entries = _by_name(describe_broker(_dyn(), per_broker=True))
    # the 314 of a Kafka 3.9 broker, Kafka 4's group.consumer.migration.policy (KIP-848 groups are
    # served here) and the unknown custom.key
    assert len(entries) == 314 + 1 + 1
    assert entries["group.consumer.migration.policy"].value == "bidirectional"
    assert entries["node.id"].value == "0" and entries["ssl.keystore.type"].value == "JKS"
    assert "log.initial.task.delay.ms" not in entries  # internal, as in Kafka
    assert (entries["custom.key"].value, entries["custom.key"].is_sensitive) == (None, True)
