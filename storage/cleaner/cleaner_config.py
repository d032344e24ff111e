"""CleanerConfig: the broker's ``log.cleaner.*`` settings the cleaner threads run with.

Built from broker properties (Kafka key names, typed values or strings) with Kafka 3.9's
defaults, so the storage layer needs nothing from the broker's config code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storage.errors import InvalidConfigError

DOUBLE_MAX = 1.7976931348623157e308

# Kafka's LogCleaner.ReconfigurableConfigs: a change to any of them restarts the threads.
RECONFIGURABLE_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
})


@dataclass(frozen=True)
class CleanerConfig:
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1048588
    max_io_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15000
    enable_cleaner: bool = True

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> CleanerConfig:
        """Kafka's LogCleaner.cleanerConfig(KafkaConfig), from broker keys (absent keys: defaults)."""
        base = cls()

        def get(key: str, default: Any, kind: type) -> Any:
            raw = props.get(key)
            if raw is None:
                return default
            try:
                if kind is bool:
                    return raw if isinstance(raw, bool) else str(raw).strip().lower() == "true"
                return kind(str(raw).strip()) if kind is int else kind(raw)
            except ValueError as exc:
                raise InvalidConfigError(f"invalid value {raw!r} for configuration {key}") from exc

        return cls(
            num_threads=get("log.cleaner.threads", base.num_threads, int),
            dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size", base.dedupe_buffer_size, int),
            dedupe_buffer_load_factor=get("log.cleaner.io.buffer.load.factor", base.dedupe_buffer_load_factor, float),
            io_buffer_size=get("log.cleaner.io.buffer.size", base.io_buffer_size, int),
            max_message_size=get("message.max.bytes", base.max_message_size, int),
            max_io_bytes_per_second=get("log.cleaner.io.max.bytes.per.second", base.max_io_bytes_per_second, float),
            backoff_ms=get("log.cleaner.backoff.ms", base.backoff_ms, int),
            enable_cleaner=get("log.cleaner.enable", base.enable_cleaner, bool),
        )

    @property
    def offset_map_memory(self) -> int:
        """Dedupe buffer per thread (Kafka caps it at Int.MaxValue)."""
        return min(self.dedupe_buffer_size // max(1, self.num_threads), 2**31 - 1)

    @property
    def io_buffer_per_thread(self) -> int:
        """Each thread's read (and write) buffer: half of its share of log.cleaner.io.buffer.size."""
        return self.io_buffer_size // max(1, self.num_threads) // 2
