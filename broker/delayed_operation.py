"""Purgatory for requests that wait for a condition (Kafka's DelayedOperationPurgatory).

A delayed operation (acks=all produce, long-poll fetch) is watched under keys (its
partitions); whoever changes a partition (an append, a high-watermark move) calls
``check_and_complete(key)``, and a timer forces completion at the deadline. Everything runs
on the event loop, so completion is a plain flag check rather than Kafka's locking.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Hashable

PURGE_THRESHOLD = 1000  # completed operations tolerated in one watch list before it is swept


class DelayedOperation(abc.ABC):
    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(delay_ms, 0)
        self.completed = False
        self._timer: asyncio.TimerHandle | None = None

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; call ``force_complete`` and return True when it holds."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Send the response (called exactly once)."""

    def on_expiration(self) -> None:
        """Hook for the deadline case, called after ``on_complete``."""

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer = None
        if self.force_complete():
            self.on_expiration()


class DelayedOperationPurgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}

    def try_complete_else_watch(self, operation: DelayedOperation, keys: list[Hashable]) -> bool:
        """Complete now if possible; otherwise watch ``keys`` until completion or the deadline."""
        if operation.try_complete():
            return True
        for key in keys:
            watchers = self._watchers.setdefault(key, [])
            watchers.append(operation)
            if len(watchers) > PURGE_THRESHOLD:
                watchers[:] = [op for op in watchers if not op.completed]
        operation._timer = asyncio.get_running_loop().call_later(operation.delay_ms / 1000, operation._expire)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try every operation watching ``key``; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        done = 0
        remaining = []
        for op in list(watchers):
            if op.completed:
                continue
            if op.try_complete():
                done += 1
            else:
                remaining.append(op)
        if remaining:
            self._watchers[key] = remaining
        else:
            self._watchers.pop(key, None)
        return done

    def watched(self) -> int:
        """Kafka's PurgatorySize: watch entries (an operation counts once per key it watches)."""
        return sum(1 for ops in self._watchers.values() for op in ops if not op.completed)

    def delayed(self) -> int:
        """Kafka's NumDelayedOperations: operations waiting, each counted once."""
        return len({id(op) for ops in self._watchers.values() for op in ops if not op.completed})

    def shutdown(self) -> None:
        """Complete everything still waiting (the broker is stopping)."""
        for ops in list(self._watchers.values()):
            for op in ops:
                op.force_complete()
        self._watchers.clear()
