"""DelayedFetch: a long-poll fetch waiting for min_bytes of data, an error, or max_wait_ms."""

from __future__ import annotations

from collections.abc import Callable

from broker.delayed_operation import DelayedOperation
from broker.replica_manager import PartitionReadResult

TopicPartition = tuple[str, int]
ReadFn = Callable[[], dict[TopicPartition, PartitionReadResult]]


class DelayedFetch(DelayedOperation):
    """``read`` re-reads the partitions (cheap: index lookups and file slices, no data copied);
    ``respond`` gets the final read."""

    def __init__(self, delay_ms: int, min_bytes: int, read: ReadFn,
                 respond: Callable[[dict[TopicPartition, PartitionReadResult]], None]) -> None:
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.read = read
        self.respond = respond
        self._result: dict[TopicPartition, PartitionReadResult] | None = None

    def try_complete(self) -> bool:
        result = self.read()
        if enough(result, self.min_bytes):
            self._result = result
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.respond(self._result if self._result is not None else self.read())


def enough(result: dict[TopicPartition, PartitionReadResult], min_bytes: int) -> bool:
    """Answer now: some partition failed or diverged, or the data found reaches min_bytes."""
    total = 0
    for read in result.values():
        if read.error or read.diverging_epoch is not None:
            return True
        total += len(read.records)
    return total >= min_bytes
