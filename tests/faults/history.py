"""What the workloads record: every acknowledged or failed write, every record a group member
consumed, every offset commit with when it was issued and when it completed, every assignment.

Times are wall-clock seconds of this machine (the Java tools stamp their events the same way), so
events of different processes can be ordered.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ProducerHistory:
    """Values are ``f"{prefix}.{n}"``, n counting from 0 in send order."""
    workload: str
    topic: str
    prefix: str
    sent: int = 0
    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    failed: int = 0
    errors: list[str] = field(default_factory=list)  # the first few distinct failures, for the report

    def error(self, message: str) -> None:
        self.failed += 1
        if message not in self.errors and len(self.errors) < 5:
            self.errors.append(message)


@dataclass(frozen=True)
class Commit:
    member: str
    issued: float
    completed: float
    offsets: dict[int, int]  # partition -> committed offset (the next one to consume)


@dataclass(frozen=True)
class Assignment:
    member: str
    time: float
    partitions: frozenset[int]
    revoked: bool = False


@dataclass
class ConsumerHistory:
    workload: str
    topic: str
    group: str
    consumed: list[tuple[str, int, int, str]] = field(default_factory=list)  # member, partition, offset, value
    commits: list[Commit] = field(default_factory=list)  # successful ones
    failed_commits: int = 0
    assignments: list[Assignment] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < 5:
            self.errors.append(message)


@dataclass
class LogRecord:
    partition: int
    offset: int
    value: str | None


@dataclass
class GroupRecord:
    """One ``__consumer_offsets`` record of a group, in log order within its partition."""
    group: str
    generation: int | None = None                            # group metadata
    assignments: dict[str, dict[str, list[int]]] | None = None  # member -> topic -> partitions
    topic: str | None = None                                 # offset commit
    partition: int | None = None
    offset: int | None = None


@dataclass
class TxnLogRecord:
    """A data record of a transactional topic with its fate, read from the log's own batches and
    COMMIT/ABORT markers (not from what a consumer chose to show)."""
    partition: int
    offset: int
    value: str | None
    producer_id: int
    state: str  # "committed", "aborted", or "open" (no marker after it yet)
