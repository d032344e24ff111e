"""What the group and transaction coordinators share about their internal topics.

Both own the keys (group ids, transactional ids) of the partitions of their topic they lead:
a key lives in partition ``abs(javaHashCode(key)) % partitions`` (Kafka's ``partitionFor``), and
a new leader rebuilds its state by replaying the partition's log from the start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.records.log_entry import iter_log_entries

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache


def java_string_hash(value: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, 32-bit signed overflow."""
    data = value.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 rather than staying negative."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions


class InternalTopicPartitions:
    """The partition count of an internal topic: its real count once it exists, the configured one before."""

    def __init__(self, topic: str, metadata_cache: MetadataCache, configured: int) -> None:
        self.topic = topic
        self.metadata_cache = metadata_cache
        self.configured = configured
        self._count: int | None = None

    @property
    def count(self) -> int:
        if self._count is None:
            existing = len(self.metadata_cache.topic_partitions(self.topic))
            if existing:
                self._count = existing
            return existing or self.configured
        return self._count

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.count)


def replay_partition_log(tp_log: Any, buffer_size: int, apply: Callable[[bytes], None]) -> None:
    """Blocking: hand the partition's whole batches, from its start to its current end, to ``apply``."""
    offset, end = tp_log.log_start_offset, tp_log.log_end_offset
    while offset < end:
        info = tp_log.read(offset, buffer_size, min_one_message=True, max_offset=end)
        buf = info.records.read_bytes() if len(info.records) else b""
        if not buf:
            break
        last = offset
        for _pos, header in iter_log_entries(buf):
            last = header.next_offset
        apply(buf)
        if last <= offset:
            break
        offset = last
