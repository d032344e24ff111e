"""kafka-python group consumers: balanced assignment, takeover on close, resuming from commits.

Each consumer polls in its own thread, as applications do: kafka-python drives its group
membership from poll(), and one thread round-robining short polls over several consumers makes
the leader abandon and restart joins.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import CONSUMER_TIMEOUTS, produce, unique

PARTITIONS = 6


class ConsumerThread(threading.Thread):
    """Owns one KafkaConsumer (not thread-safe): polls, records assignment and values, commits on request."""

    def __init__(self, make: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._make = make
        self.assignment: frozenset[int] = frozenset()
        self.values: set[bytes] = set()
        self.committed: dict[int, int | None] = {}
        self.error: BaseException | None = None
        self._stopping = threading.Event()
        self._commit_requested = threading.Event()
        self.commit_done = threading.Event()

    def run(self) -> None:
        consumer = self._make()
        try:
            while not self._stopping.is_set():
                for records in consumer.poll(timeout_ms=500).values():
                    self.values.update(r.value for r in records)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                if self._commit_requested.is_set() and not self.commit_done.is_set():
                    consumer.commit()
                    self.committed = {tp.partition: consumer.committed(tp) for tp in consumer.assignment()}
                    self.commit_done.set()
        except BaseException as exc:  # surfaced by the test through .error
            self.error = exc
        finally:
            consumer.close()

    def commit(self) -> None:
        self._commit_requested.set()
        assert self.commit_done.wait(30), "commit did not happen"

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)
        assert not self.is_alive(), "consumer thread did not stop"
        assert self.error is None, self.error


def _start(broker: BrokerProcess, topic: str, group: str, count: int) -> list[ConsumerThread]:
    from kafka import KafkaConsumer

    def make() -> Any:
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, **CONSUMER_TIMEOUTS)

    threads = [ConsumerThread(make) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def _stop(threads: list[ConsumerThread]) -> None:
    for thread in threads:
        thread._stopping.set()
    for thread in threads:
        thread.stop()


def _balanced(threads: list[ConsumerThread]) -> list[frozenset[int]] | None:
    """The assignments once they are non-empty, disjoint and cover the topic."""
    for thread in threads:
        assert thread.error is None, thread.error
    parts = [t.assignment for t in threads]
    flat = [p for part in parts for p in part]
    return parts if all(parts) and len(flat) == len(set(flat)) == PARTITIONS else None


def test_three_consumers_split_six_partitions_and_take_over_on_close(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    threads = _start(broker, topic, group, 3)
    try:
        parts = wait_for(lambda: _balanced(threads), "a balanced assignment of 3 consumers", 60)
        assert sorted(len(p) for p in parts) == [2, 2, 2]
        threads.pop().stop()  # closes the consumer, which leaves the group: the others take its partitions
        parts = wait_for(lambda: _balanced(threads), "the 2 remaining consumers to cover the topic", 60)
        assert sorted(len(p) for p in parts) == [3, 3]
    finally:
        _stop(threads)


def test_committed_offsets_resume_after_all_consumers_restart(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)

    def consumed(threads: list[ConsumerThread], expected: set[bytes]) -> set[bytes]:
        seen: set[bytes] = set()

        def all_seen() -> bool:
            seen.clear()
            for thread in threads:
                seen.update(thread.values)
            return seen >= expected

        wait_for(all_seen, f"{len(expected)} messages", 60)
        return seen

    threads = _start(broker, topic, group, 3)
    try:
        wait_for(lambda: _balanced(threads), "a balanced assignment of 3 consumers", 60)
        first = set(produce(broker.bootstrap, topic, PARTITIONS, 10, prefix="first"))
        assert consumed(threads, first) == first
        for thread in threads:
            thread.commit()
        committed = {p: o for thread in threads for p, o in thread.committed.items()}
        assert committed == {p: 10 for p in range(PARTITIONS)}
    finally:
        _stop(threads)

    second = set(produce(broker.bootstrap, topic, PARTITIONS, 5, prefix="second"))
    threads = _start(broker, topic, group, 3)
    try:
        # Rebalances may deliver a message twice, but nothing committed before the restart comes back.
        assert consumed(threads, second) == second
    finally:
        _stop(threads)
