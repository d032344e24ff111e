"""What one pass of bench/vs_kafka.py's rows over one broker kind shares: the plan (which rows, what
sizes), the results table, Kafka's Java tools, the profiler and the repeat number."""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from bench.vs_kafka_java import JavaTools
from bench.vs_kafka_kinds import BrokerKind
from bench.vs_kafka_profile import Profiler
from bench.vs_kafka_table import Results, Row

GROUPS = ("produce", "consume", "latency", "e2e", "connections", "memory")
CLIENTS = ("librdkafka", "java")


@dataclass
class Plan:
    groups: set[str]
    clients: set[str]
    sizes: list[int]
    partitions: list[int]
    replication: list[int]
    messages: int
    rates: list[int]
    latency_seconds: float
    e2e_messages: int
    connections: int
    producers: int
    repeats: int
    consumer_config: dict[str, str] = field(default_factory=dict)  # librdkafka consumer settings, every kind
    producer_config: dict[str, str] = field(default_factory=dict)  # librdkafka producer settings of the throughput rows

    @property
    def brokers_needed(self) -> int:
        replicated = (self.groups & {"produce", "consume", "latency"}) and max(self.replication) > 1
        return 3 if replicated else 1


@dataclass
class Run:
    plan: Plan
    results: Results
    java: JavaTools
    profiler: Profiler | None
    repeat: int = 0
    broker_cpus: set[int] | None = None  # --pin-brokers: where the brokers run (the clients elsewhere)

    def guarded(self, kind: BrokerKind, rows: Sequence[Row], measure: Callable[[], None]) -> None:
        """Run ``measure``; if it raises, its ``rows`` that got no value this repeat read "failed" (with
        the reason under the table) and the bench goes on. A row that failed is not tried again."""
        if any(self.results.has_failed(row, kind.name) for row in rows):
            return
        before = {row: len(self.results.values.get((row, kind.name), [])) for row in rows}
        try:
            measure()
        except Exception as exc:  # noqa: BLE001 - one row's failure must not end the run
            traceback.print_exc(file=sys.stderr)
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
            for row in rows:
                if len(self.results.values.get((row, kind.name), [])) == before[row]:
                    self.results.failed(row, kind.name, reason)
            if not rows:
                self.results.notes.append(f"{kind.label}: {reason}")

    @contextmanager
    def profile(self, kind: BrokerKind, name: str, followers: bool = False) -> Iterator[None]:
        """py-spy on our leader (and followers) during the with-block, first repeat only; the files
        are named after ``name``."""
        if self.profiler is None or kind.name != "ours" or self.repeat:
            yield
            return
        brokers = kind.brokers if followers else kind.brokers[:1]
        pids = {f"broker{i}": b.process.pid for i, b in enumerate(brokers) if b.process is not None}
        with self.profiler.recording(re.sub(r"[^a-z0-9.=]+", "-", name.lower()).strip("-"), pids):
            yield
