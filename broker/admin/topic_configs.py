"""Kafka 3.9's topic-level configs (LogConfig's ConfigDef): types, defaults, validation.

Validation follows Kafka's messages: an unknown name is an InvalidConfigurationException
("Unknown topic config name: x"), a bad value a ConfigException ("Invalid value v for
configuration k: reason"). Both are TopicConfigError here; `unknown_name` tells them apart
because AlterConfigs reports them with different codes (INVALID_CONFIG vs INVALID_REQUEST).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config_defs import COMPRESSION_TYPES, ConfigType, LONG_MAX

Check = Callable[[Any], str | None]  # None when fine, else Kafka's reason text

_INT_RANGE = {ConfigType.INT: (-(2**31), 2**31 - 1), ConfigType.LONG: (-(2**63), 2**63 - 1)}


class TopicConfigError(Exception):
    def __init__(self, message: str, unknown_name: bool = False) -> None:
        super().__init__(message)
        self.unknown_name = unknown_name


def _at_least(minimum: float) -> Check:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def _between(lo: float, hi: float) -> Check:
    def check(v: Any) -> str | None:
        if v < lo:
            return f"Value must be at least {lo}"
        if v > hi:
            return f"Value must be no more than {hi}"
        return None
    return check


def _in(*choices: str) -> Check:
    return lambda v: None if v in choices else f"String must be one of: {', '.join(choices)}"


def _list_in(*choices: str) -> Check:
    def check(items: list[str]) -> str | None:
        bad = [i for i in items if i not in choices]
        return f"String must be one of: {', '.join(choices)}" if bad else None
    return check


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9, or -1"


_THROTTLED = re.compile(r"^(\*|\d+:\d+)$")


def _throttled_replicas(items: list[str]) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*` alone, or partition:broker entries."""
    if items == ["*"] or all(_THROTTLED.match(i.strip()) for i in items):
        return None
    return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],..."


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


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: Any  # typed
    check: Check | None = None

    def parse(self, raw: str) -> Any:
        """Kafka's ConfigDef.parseType + validator, with its error texts."""
        text = raw.strip()
        try:
            if self.type == ConfigType.BOOLEAN:
                if text.lower() not in ("true", "false"):
                    raise TopicConfigError(self._bad(raw, "Expected value to be either true or false"))
                value: Any = text.lower() == "true"
            elif self.type in _INT_RANGE:
                lo, hi = _INT_RANGE[self.type]
                value = int(text, 10)
                if not lo <= value <= hi:
                    raise ValueError(text)
            elif self.type == ConfigType.DOUBLE:
                value = float(text)
            elif self.type == ConfigType.LIST:
                value = [item.strip() for item in text.split(",")] if text else []
            else:
                value = text
        except ValueError:
            raise TopicConfigError(self._bad(raw, f"Not a number of type {self.type.name}")) from None
        if self.check is not None:
            reason = self.check(value)
            if reason is not None:
                raise TopicConfigError(self._bad(raw, reason))
        return value

    def _bad(self, raw: str, reason: str) -> str:
        return f"Invalid value {raw} for configuration {self.name}: {reason}"


B, S, I, L, D, LI = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST
)

TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef("cleanup.policy", LI, ["delete"], _list_in("compact", "delete")),
        TopicConfigDef("compression.gzip.level", I, -1, _gzip_level),
        TopicConfigDef("compression.lz4.level", I, 9, _between(1, 17)),
        TopicConfigDef("compression.type", S, "producer", _in(*COMPRESSION_TYPES)),
        TopicConfigDef("compression.zstd.level", I, 3, _between(-131072, 22)),
        TopicConfigDef("delete.retention.ms", L, 86400000, _at_least(0)),
        TopicConfigDef("file.delete.delay.ms", L, 60000, _at_least(0)),
        TopicConfigDef("flush.messages", L, LONG_MAX, _at_least(1)),
        TopicConfigDef("flush.ms", L, LONG_MAX, _at_least(0)),
        TopicConfigDef("follower.replication.throttled.replicas", LI, [], _throttled_replicas),
        TopicConfigDef("index.interval.bytes", I, 4096, _at_least(0)),
        TopicConfigDef("leader.replication.throttled.replicas", LI, [], _throttled_replicas),
        TopicConfigDef("local.retention.bytes", L, -2, _at_least(-2)),
        TopicConfigDef("local.retention.ms", L, -2, _at_least(-2)),
        TopicConfigDef("max.compaction.lag.ms", L, LONG_MAX, _at_least(1)),
        TopicConfigDef("max.message.bytes", I, 1048588, _at_least(0)),
        TopicConfigDef("message.downconversion.enable", B, True),
        TopicConfigDef("message.format.version", S, "3.0-IV1", _message_format_version),
        TopicConfigDef("message.timestamp.after.max.ms", L, LONG_MAX, _at_least(0)),
        TopicConfigDef("message.timestamp.before.max.ms", L, LONG_MAX, _at_least(0)),
        TopicConfigDef("message.timestamp.difference.max.ms", L, LONG_MAX, _at_least(0)),
        TopicConfigDef("message.timestamp.type", S, "CreateTime", _in("CreateTime", "LogAppendTime")),
        TopicConfigDef("min.cleanable.dirty.ratio", D, 0.5, _between(0, 1)),
        TopicConfigDef("min.compaction.lag.ms", L, 0, _at_least(0)),
        TopicConfigDef("min.insync.replicas", I, 1, _at_least(1)),
        TopicConfigDef("preallocate", B, False),
        TopicConfigDef("remote.log.copy.disable", B, False),
        TopicConfigDef("remote.log.delete.on.disable", B, False),
        TopicConfigDef("remote.storage.enable", B, False),
        TopicConfigDef("retention.bytes", L, -1),
        TopicConfigDef("retention.ms", L, 604800000, _at_least(-1)),
        TopicConfigDef("segment.bytes", I, 1073741824, _at_least(14)),
        TopicConfigDef("segment.index.bytes", I, 10485760, _at_least(4)),
        TopicConfigDef("segment.jitter.ms", L, 0, _at_least(0)),
        TopicConfigDef("segment.ms", L, 604800000, _at_least(1)),
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


def java_double(value: float) -> str:
    """Java's Double.toString for the values configs use (0.5, 1.0, 1.7976931348623157E308)."""
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        mantissa, exponent = f"{value!r}".lower().split("e") if "e" in repr(value) else (repr(value), "0")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}E{int(exponent)}"
    text = repr(value)
    return text if "." in text else text + ".0"
