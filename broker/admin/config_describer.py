"""DescribeConfigs entries: value, source, synonyms, read-only flag and type of every config
of a topic or broker (Kafka's ConfigHelper.createTopicConfigEntry/createBrokerConfigEntry).

Synonyms are listed in Kafka's order: every synonym's per-broker dynamic value, then the
dynamic defaults, the static values and the ConfigDef defaults; a topic override comes first.
The first synonym names the entry's source (DEFAULT_CONFIG when there is none). Entries come in
the order Kafka's answer has them (``kafka_map_order``), which clients keep when they collide in
their own hash maps (kafka-topics' "Configs:" column).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from broker.admin.dynamic_broker_config import DYNAMIC_CONFIGS, QUOTA_CONFIG_KEYS, DynamicBrokerConfig, synonym_group
from broker.admin.topic_configs import TOPIC_CONFIG_DEFS, to_config_string
from broker.config import KafkaConfig
from broker.coordinator.internal_topic import java_string_hash
from broker.config_defs import NON_KAFKA_CONFIG_KEYS, CONFIG_KEYS, INTERNAL_KEYS, TOPIC_CONFIG_SYNONYMS, ConfigType


class ConfigSource(IntEnum):
    """DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7  # Kafka 4
    DYNAMIC_GROUP_CONFIG = 8  # Kafka 4: a group's override (GROUP resource)


UNKNOWN_TYPE = 0


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: int
    synonyms: list[ConfigSynonym] = field(default_factory=list)


def kafka_map_order(names: Iterable[str]) -> list[str]:
    """The iteration order of the Scala mutable.HashMap Kafka's DescribeConfigs builds its entries
    from: buckets of the spread String.hashCode in a power-of-two table sized for the entries at
    load factor 0.75, ascending; within a bucket by the spread hash as a signed int."""
    names = list(names)
    capacity = 16
    while capacity * 0.75 <= len(names):
        capacity *= 2

    def position(name: str) -> tuple[int, int]:
        h = java_string_hash(name) & 0xFFFFFFFF  # as an unsigned 32-bit value
        spread = h ^ (h >> 16)
        return spread & (capacity - 1), spread - (1 << 32) if spread >= 1 << 31 else spread

    return sorted(names, key=position)


def _synonyms(name: str, names: Iterable[str], dyn: DynamicBrokerConfig) -> list[ConfigSynonym]:
    names = list(names)
    found: list[ConfigSynonym] = []
    layers: list[tuple[Mapping[str, Any], ConfigSource]] = [
        (dyn.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dyn.defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (dyn.static, ConfigSource.STATIC_BROKER_CONFIG),
    ]
    for layer, source in layers:
        found.extend(ConfigSynonym(n, layer[n], source) for n in names if n in layer)
    for n in names:
        default = dyn.static_default(n)
        if default is not None:
            found.append(ConfigSynonym(n, to_config_string(default, CONFIG_KEYS[n].type), ConfigSource.DEFAULT_CONFIG))
    # Kafka drops the synonyms listed before the described name itself.
    for i, synonym in enumerate(found):
        if synonym.name == name:
            return found[i:]
    return []


def topic_config_values(overrides: Mapping[str, str], broker: KafkaConfig) -> dict[str, Any]:
    """Every topic config's typed value: the override, else the broker's default, else Kafka's."""
    values: dict[str, Any] = {}
    for name, definition in TOPIC_CONFIG_DEFS.items():
        if name in overrides:
            values[name] = definition.parse(overrides[name])
        elif name in TOPIC_CONFIG_SYNONYMS:
            values[name] = broker.topic_default(name)
        else:
            values[name] = definition.default
    return values


def describe_topic(
    overrides: Mapping[str, str], dyn: DynamicBrokerConfig, names: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """Entries of a topic's configs (all, or only `names`)."""
    values = topic_config_values(overrides, dyn.effective_config())
    entries = []
    for name in kafka_map_order(values):
        if names is not None and name not in names:
            continue
        config_type = TOPIC_CONFIG_DEFS[name].type
        value = to_config_string(values[name], config_type)
        synonyms: list[ConfigSynonym] = []
        broker_names = TOPIC_CONFIG_SYNONYMS.get(name)
        if broker_names:
            synonyms = _synonyms(broker_names[0], broker_names, dyn)
        if name in overrides:
            synonyms.insert(0, ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, False, int(config_type), synonyms))
    return entries


def describe_broker(
    dyn: DynamicBrokerConfig, per_broker: bool, names: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """This broker's configs (`per_broker`), or the cluster-wide dynamic defaults."""
    if per_broker:
        effective = dyn.effective_config()
        set_names = dyn.effective_props()
        raw_values: dict[str, Any] = {k: v for k, v in set_names.items() if k not in CONFIG_KEYS}
        raw_values.update((k, v) for k, v in effective.values().items()
                          if k not in INTERNAL_KEYS and k not in NON_KAFKA_CONFIG_KEYS or k in set_names)
    else:
        raw_values = dict(dyn.defaults)
    entries = []
    for name in kafka_map_order(raw_values):
        if names is not None and name not in names:
            continue
        key = None if name in NON_KAFKA_CONFIG_KEYS else CONFIG_KEYS.get(name) or QUOTA_CONFIG_KEYS.get(name)
        config_type: int = int(key.type) if key is not None else UNKNOWN_TYPE
        raw = raw_values[name]
        # Kafka cannot know whether an unknown key is a password: it hides its value too.
        sensitive = key is None or key.type == ConfigType.PASSWORD
        if sensitive:
            value = None
        elif isinstance(raw, str):
            value = raw
        else:
            value = to_config_string(raw, key.type)
        synonyms = _synonyms(name, synonym_group(name), dyn)
        if not per_broker:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        if sensitive:
            synonyms = [ConfigSynonym(s.name, None, s.source) for s in synonyms]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, name not in DYNAMIC_CONFIGS, sensitive, config_type, synonyms))
    return entries
