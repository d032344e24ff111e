"""Kafka 3.9's topic-level configs (LogConfig's ConfigDef): types, defaults, validation.

Validation follows Kafka's messages: an unknown name is an InvalidConfigurationException
("Unknown topic config name: x"), a bad value a ConfigException ("Invalid value v for
configuration k: reason"). Both are TopicConfigError here; `unknown_name` tells them apart
because AlterConfigs reports them with different codes (INVALID_CONFIG vs INVALID_REQUEST).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config_defs import (
    COMPRESSION_TYPES,
    LONG_MAX,
    ConfigError,
    ConfigType,
    Validator,
    at_least,
    between,
    each_of,
    gzip_level,
    java_double,
    one_of,
    parse_value,
)


class TopicConfigError(Exception):
    def __init__(self, message: str, unknown_name: bool = False) -> None:
        super().__init__(message)
        self.unknown_name = unknown_name


_THROTTLED = re.compile(r"^(\*|\d+:\d+)$")


def _throttled_replicas(key: str, items: list[str]) -> None:
    """Kafka's ThrottledReplicaListValidator: `*` alone, or partition:broker entries."""
    if items != ["*"] and not all(_THROTTLED.match(i.strip()) for i in items):
        raise ConfigError(key, "must be the literal '*' or a list of replicas in the following format: "
                               "[partitionId]:[brokerId],...", items)


# Kafka 3.9's MetadataVersion: releases with their number of internal versions (IV0, IV1, ...).
_RELEASE_IVS = {
    "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2,
    "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1,
    "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1, "4.0": 2,
}
_UNRELEASED = "4.0"  # its internal versions exist in 3.9, the short version does not
METADATA_VERSIONS = frozenset(
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0"]
    + [f"{release}-IV{i}" for release, count in _RELEASE_IVS.items() for i in range(count)]
    + [release for release in _RELEASE_IVS if release != _UNRELEASED]
)


def _message_format_version(v: str) -> str | None:
    """Kafka's MetadataVersion.fromVersionString: extra segments are ignored ("0.10.0.1" is 0.10.0)."""
    segments = v.split(".")
    kept = 3 if v.startswith("0.") else 2
    key = v if kept >= len(segments) else ".".join(segments[:kept])
    return None if key in METADATA_VERSIONS else f"Version {v} is not a valid version"


def _valid_message_format_version(key: str, value: str) -> None:
    reason = _message_format_version(value)
    if reason is not None:
        raise ConfigError(key, reason, value)


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: Any  # typed
    check: Validator | None = None

    def parse(self, raw: str) -> Any:
        """Kafka's ConfigDef.parseType + validator, with its error texts."""
        try:
            value = parse_value(self.name, self.type, raw)
            if self.check is not None:
                self.check(self.name, value)
        except ConfigError as exc:
            raise TopicConfigError(str(exc)) from None
        return value


B, S, I, L, D, LI = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST
)

TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef("cleanup.policy", LI, ["delete"], each_of("compact", "delete")),
        TopicConfigDef("compression.gzip.level", I, -1, gzip_level),
        TopicConfigDef("compression.lz4.level", I, 9, between(1, 17)),
        TopicConfigDef("compression.type", S, "producer", one_of(*COMPRESSION_TYPES)),
        TopicConfigDef("compression.zstd.level", I, 3, between(-131072, 22)),
        TopicConfigDef("delete.retention.ms", L, 86400000, at_least(0)),
        TopicConfigDef("file.delete.delay.ms", L, 60000, at_least(0)),
        TopicConfigDef("flush.messages", L, LONG_MAX, at_least(1)),
        TopicConfigDef("flush.ms", L, LONG_MAX, at_least(0)),
        TopicConfigDef("follower.replication.throttled.replicas", LI, [], _throttled_replicas),
        TopicConfigDef("index.interval.bytes", I, 4096, at_least(0)),
        TopicConfigDef("leader.replication.throttled.replicas", LI, [], _throttled_replicas),
        TopicConfigDef("local.retention.bytes", L, -2, at_least(-2)),
        TopicConfigDef("local.retention.ms", L, -2, at_least(-2)),
        TopicConfigDef("max.compaction.lag.ms", L, LONG_MAX, at_least(1)),
        TopicConfigDef("max.message.bytes", I, 1048588, at_least(0)),
        TopicConfigDef("message.downconversion.enable", B, True),
        TopicConfigDef("message.format.version", S, "3.0-IV1", _valid_message_format_version),
        TopicConfigDef("message.timestamp.after.max.ms", L, LONG_MAX, at_least(0)),
        TopicConfigDef("message.timestamp.before.max.ms", L, LONG_MAX, at_least(0)),
        TopicConfigDef("message.timestamp.difference.max.ms", L, LONG_MAX, at_least(0)),
        TopicConfigDef("message.timestamp.type", S, "CreateTime", one_of("CreateTime", "LogAppendTime")),
        TopicConfigDef("min.cleanable.dirty.ratio", D, 0.5, between(0, 1)),
        TopicConfigDef("min.compaction.lag.ms", L, 0, at_least(0)),
        TopicConfigDef("min.insync.replicas", I, 1, at_least(1)),
        TopicConfigDef("preallocate", B, False),
        TopicConfigDef("remote.log.copy.disable", B, False),
        TopicConfigDef("remote.log.delete.on.disable", B, False),
        TopicConfigDef("remote.storage.enable", B, False),
        TopicConfigDef("retention.bytes", L, -1),
        TopicConfigDef("retention.ms", L, 604800000, at_least(-1)),
        TopicConfigDef("segment.bytes", I, 1073741824, at_least(14)),
        TopicConfigDef("segment.index.bytes", I, 10485760, at_least(4)),
        TopicConfigDef("segment.jitter.ms", L, 0, at_least(0)),
        TopicConfigDef("segment.ms", L, 604800000, at_least(1)),
        TopicConfigDef("unclean.leader.election.enable", B, False),
    )
}


def validate_topic_config(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka's LogConfig.validate: names first, then each value, then cross-key rules."""
    for name in props:
        if name not in TOPIC_CONFIG_DEFS:
            raise TopicConfigError(f"Unknown topic config name: {name}", unknown_name=True)
    parsed = {name: TOPIC_CONFIG_DEFS[name].parse(value) for name, value in props.items()}
    min_lag = parsed.get("min.compaction.lag.ms", TOPIC_CONFIG_DEFS["min.compaction.lag.ms"].default)
    max_lag = parsed.get("max.compaction.lag.ms", TOPIC_CONFIG_DEFS["max.compaction.lag.ms"].default)
    if min_lag > max_lag:
        raise TopicConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})",
            unknown_name=True,  # an InvalidConfigurationException in Kafka, like unknown names
        )
    return parsed


def to_config_string(value: Any, config_type: ConfigType) -> str | None:
    """Kafka's ConfigDef.convertToString (what DescribeConfigs shows)."""
    if value is None:
        return None
    if config_type == ConfigType.LIST:
        return ",".join(str(v) for v in value)
    if config_type == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if config_type == ConfigType.DOUBLE:
        return java_double(float(value))
    return str(value)
