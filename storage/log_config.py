"""LogConfig: the topic-level log settings under Kafka's names and 3.9 defaults.

``LogConfig.from_props({"segment.bytes": "1048576"})`` builds one from topic overrides (strings
or typed values); ``broker_defaults(server_props)`` turns broker ``log.*`` settings into the
defaults that topic overrides apply on top of, as Kafka's LogConfig.fromProps does.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1

# python attribute -> Kafka topic config key
TOPIC_KEYS: dict[str, str] = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "segment_jitter_ms": "segment.jitter.ms",
    "segment_index_bytes": "segment.index.bytes",
    "index_interval_bytes": "index.interval.bytes",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "file_delete_delay_ms": "file.delete.delay.ms",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "cleanup_policy": "cleanup.policy",
    "message_timestamp_type": "message.timestamp.type",
    "message_timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "message_timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "message_timestamp_difference_max_ms": "message.timestamp.difference.max.ms",
    "compression_type": "compression.type",
    "min_insync_replicas": "min.insync.replicas",
    "max_message_bytes": "max.message.bytes",
    "unclean_leader_election_enable": "unclean.leader.election.enable",
    "preallocate": "preallocate",
    "delete_retention_ms": "delete.retention.ms",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
    "message_downconversion_enable": "message.downconversion.enable",
}

# broker config key -> (topic attribute, multiplier to milliseconds or 1); later keys win
BROKER_KEYS: list[tuple[str, str, int]] = [
    ("log.segment.bytes", "segment_bytes", 1),
    ("log.roll.hours", "segment_ms", 3_600_000),
    ("log.roll.ms", "segment_ms", 1),
    ("log.roll.jitter.hours", "segment_jitter_ms", 3_600_000),
    ("log.roll.jitter.ms", "segment_jitter_ms", 1),
    ("log.index.size.max.bytes", "segment_index_bytes", 1),
    ("log.index.interval.bytes", "index_interval_bytes", 1),
    ("log.retention.hours", "retention_ms", 3_600_000),
    ("log.retention.minutes", "retention_ms", 60_000),
    ("log.retention.ms", "retention_ms", 1),
    ("log.retention.bytes", "retention_bytes", 1),
    ("log.segment.delete.delay.ms", "file_delete_delay_ms", 1),
    ("log.flush.interval.messages", "flush_messages", 1),
    ("log.flush.scheduler.interval.ms", "flush_ms", 1),
    ("log.flush.interval.ms", "flush_ms", 1),
    ("log.cleanup.policy", "cleanup_policy", 1),
    ("log.message.timestamp.type", "message_timestamp_type", 1),
    ("log.message.timestamp.before.max.ms", "message_timestamp_before_max_ms", 1),
    ("log.message.timestamp.after.max.ms", "message_timestamp_after_max_ms", 1),
    ("log.message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms", 1),
    ("compression.type", "compression_type", 1),
    ("min.insync.replicas", "min_insync_replicas", 1),
    ("message.max.bytes", "max_message_bytes", 1),
    ("unclean.leader.election.enable", "unclean_leader_election_enable", 1),
    ("log.preallocate", "preallocate", 1),
    ("log.cleaner.delete.retention.ms", "delete_retention_ms", 1),
    ("log.cleaner.min.compaction.lag.ms", "min_compaction_lag_ms", 1),
    ("log.cleaner.max.compaction.lag.ms", "max_compaction_lag_ms", 1),
    ("log.cleaner.min.cleanable.ratio", "min_cleanable_dirty_ratio", 1),
    ("log.message.downconversion.enable", "message_downconversion_enable", 1),
]

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("delete", "compact")


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX  # deprecated: the bound before/after leave unset
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    max_message_bytes: int = 1048588
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    message_downconversion_enable: bool = True
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        checks = [
            (self.segment_bytes >= 14, "segment.bytes must be at least 14"),
            (self.segment_ms >= 1, "segment.ms must be at least 1"),
            (self.segment_jitter_ms >= 0, "segment.jitter.ms must be non-negative"),
            (self.segment_index_bytes >= 4, "segment.index.bytes must be at least 4"),
            (self.index_interval_bytes >= 0, "index.interval.bytes must be non-negative"),
            (self.retention_ms >= -1, "retention.ms must be -1 or more"),
            (self.file_delete_delay_ms >= 0, "file.delete.delay.ms must be non-negative"),
            (self.flush_messages >= 1, "flush.messages must be at least 1"),
            (self.flush_ms >= 0, "flush.ms must be non-negative"),
            (self.max_message_bytes >= 0, "max.message.bytes must be non-negative"),
            (self.min_insync_replicas >= 1, "min.insync.replicas must be at least 1"),
            (self.message_timestamp_type in TIMESTAMP_TYPES, f"message.timestamp.type must be one of {TIMESTAMP_TYPES}"),
            (self.compression_type in COMPRESSION_TYPES, f"compression.type must be one of {COMPRESSION_TYPES}"),
            (set(self.cleanup_policy) <= set(CLEANUP_POLICIES), f"cleanup.policy must be a list of {CLEANUP_POLICIES}"),
            (self.delete_retention_ms >= 0, "delete.retention.ms must be non-negative"),
            (self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms must be non-negative"),
            (self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms must be at least 1"),
            (0 <= self.min_cleanable_dirty_ratio <= 1, "min.cleanable.dirty.ratio must be between 0 and 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidConfigError(message)

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime record may be (Kafka's getMessageTimestampBeforeMaxMs)."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime record may be (Kafka's getMessageTimestampAfterMaxMs)."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @functools.cached_property
    def log_append_time(self) -> bool:  # cached (in the instance dict, frozen or not): read per append
        return self.message_timestamp_type == "LogAppendTime"

    @functools.cached_property
    def bounds_create_time(self) -> bool:
        """CreateTime records must fall within message.timestamp.before/after.max.ms of now."""
        return not self.log_append_time and (self.timestamp_before_max_ms != LONG_MAX
                                             or self.timestamp_after_max_ms != LONG_MAX)

    @functools.cached_property
    def checks_each_record(self) -> bool:
        """Whether a produced batch's records are checked for more than their structure (keys on a
        compacted topic, CreateTime bounds); read per produced batch."""
        return self.compact_enabled or self.bounds_create_time

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    def random_segment_jitter(self) -> int:
        """Each segment's roll deadline is segment.ms minus a random jitter in [0, segment.jitter.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    def to_props(self) -> dict[str, str]:
        """Kafka keys with string values, as DescribeConfigs reports them."""
        out = {}
        for name, key in TOPIC_KEYS.items():
            value = getattr(self, name)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out

    @classmethod
    def from_props(cls, overrides: Mapping[str, Any] | None = None, defaults: LogConfig | None = None) -> LogConfig:
        """Apply topic overrides (Kafka keys) on top of ``defaults``; unknown keys are ignored."""
        base = defaults or cls()
        by_key = {key: name for name, key in TOPIC_KEYS.items()}
        changes = {name: _parse(name, value) for key, value in (overrides or {}).items() if (name := by_key.get(key))}
        return dataclasses.replace(base, **changes, overridden=base.overridden | frozenset(
            TOPIC_KEYS[name] for name in changes))


def broker_defaults(server_props: Mapping[str, Any]) -> LogConfig:
    """The LogConfig that broker-level ``log.*`` settings give every topic without overrides."""
    changes: dict[str, Any] = {}
    for key, name, multiplier in BROKER_KEYS:
        if key in server_props and server_props[key] is not None:
            value = _parse(name, server_props[key])
            changes[name] = value * multiplier if multiplier != 1 else value
    return dataclasses.replace(LogConfig(), **changes)


def _parse(name: str, value: Any) -> Any:
    kind = type(getattr(LogConfig(), name))
    key = TOPIC_KEYS[name]
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(text)
            return text == "true"
        if kind is tuple:
            items = value if isinstance(value, (list, tuple)) else str(value).split(",")
            return tuple(item.strip().lower() for item in items if item.strip())
        if kind is float:
            return float(value)
        if kind is int:
            return int(str(value).strip())
        return str(value).strip()
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value {value!r} for configuration {key}") from exc
