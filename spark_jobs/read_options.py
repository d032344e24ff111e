"""The kafka-log source's options, parsed once on the driver into a typed, picklable value.

Option names follow Spark's Kafka source where one exists (``startingOffsets``,
``endingOffsets``, ``startingTimestamp``, ``endingTimestamp``, ``kafka.isolation.level`` is
spelled ``isolation.level`` here). Offsets are either one number for every partition or
Spark's JSON form ``{"topic": {"0": 23}}`` (-2 = earliest, -1 = latest).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
EARLIEST = -2
LATEST = -1
DEFAULT_MAX_SPLIT_BYTES = 128 * 1024 * 1024

OffsetSpec = dict[str, dict[int, int]]


class OptionError(ValueError):
    """An option value the source cannot use."""


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...]
    topics: Optional[tuple[str, ...]] = None
    topic_pattern: Optional[str] = None
    starting_offset: Optional[int] = None
    starting_offsets: Optional[OffsetSpec] = None
    ending_offset: Optional[int] = None
    ending_offsets: Optional[OffsetSpec] = None
    starting_timestamp: Optional[int] = None
    ending_timestamp: Optional[int] = None
    isolation_level: str = READ_UNCOMMITTED
    committed_only: bool = False
    max_split_bytes: int = DEFAULT_MAX_SPLIT_BYTES
    skip_corrupt: bool = False

    def wants_topic(self, topic: str) -> bool:
        if self.topics is not None and topic not in self.topics:
            return False
        return self.topic_pattern is None or re.fullmatch(self.topic_pattern, topic) is not None

    def offset_bounds(self, topic: str, partition: int) -> tuple[Optional[int], Optional[int]]:
        """(first offset wanted, exclusive end) for one partition; None = unbounded."""
        start = _lookup(self.starting_offsets, topic, partition, self.starting_offset)
        end = _lookup(self.ending_offsets, topic, partition, self.ending_offset)
        return (None if start in (None, EARLIEST) else start, None if end in (None, LATEST) else end)


def _lookup(spec: Optional[OffsetSpec], topic: str, partition: int, default: Optional[int]) -> Optional[int]:
    if spec is None:
        return default
    return spec.get(topic, {}).get(partition)


def bool_option(options: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = options.get(name, str(default)).strip().lower()
    if raw not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {raw!r}")
    return raw == "true"


def int_option(options: Mapping[str, str], name: str) -> Optional[int]:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {raw!r}") from None


def _offsets(options: Mapping[str, str], name: str) -> tuple[Optional[int], Optional[OffsetSpec]]:
    raw = options.get(name)
    if raw is None or raw.strip() in ("earliest", "latest"):
        return None, None
    if not raw.lstrip().startswith("{"):
        return int_option(options, name), None
    try:
        parsed = json.loads(raw)
        return None, {t: {int(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"option {name} must be an offset or JSON like {{\"topic\": {{\"0\": 23}}}}") from None


def _paths(options: Mapping[str, str]) -> tuple[str, ...]:
    if "paths" in options:
        paths = tuple(json.loads(options["paths"]))
    elif "path" in options:
        paths = (options["path"],)
    else:
        paths = ()
    if not paths:
        raise OptionError("kafka-log needs at least one path: spark.read.format('kafka-log').load(paths)")
    return paths


def parse_options(options: Mapping[str, str]) -> ReadOptions:
    # Spark hands Python data sources case-insensitive option names, lower-cased.
    lowered = {k.lower(): v for k, v in options.items()}
    topics = lowered.get("topics")
    isolation = lowered.get("isolation.level", READ_UNCOMMITTED)
    if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise OptionError(f"isolation.level must be {READ_COMMITTED} or {READ_UNCOMMITTED}, not {isolation!r}")
    starting_offset, starting_offsets = _offsets(lowered, "startingoffsets")
    ending_offset, ending_offsets = _offsets(lowered, "endingoffsets")
    max_split = int_option(lowered, "maxsplitbytes") or DEFAULT_MAX_SPLIT_BYTES
    if max_split <= 0:
        raise OptionError("maxSplitBytes must be positive")
    return ReadOptions(
        paths=_paths(lowered),
        topics=tuple(t.strip() for t in topics.split(",") if t.strip()) if topics else None,
        topic_pattern=lowered.get("topicpattern"),
        starting_offset=starting_offset,
        starting_offsets=starting_offsets,
        ending_offset=ending_offset,
        ending_offsets=ending_offsets,
        starting_timestamp=int_option(lowered, "startingtimestamp"),
        ending_timestamp=int_option(lowered, "endingtimestamp"),
        isolation_level=isolation,
        committed_only=bool_option(lowered, "committedonly"),
        max_split_bytes=max_split,
        skip_corrupt=bool_option(lowered, "skipcorrupt"),
    )
