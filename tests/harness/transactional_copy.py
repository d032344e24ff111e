"""An exactly-once copy through librdkafka, the consume-transform-produce loop of Kafka's EOS design.

``TransactionalCopier`` reads a topic with a read_committed group member and, per batch, writes
each record to the same partition of another topic and sends the consumer's positions to the
transaction (``send_offsets_to_transaction``) before committing, so output and input progress
commit together. It handles errors as librdkafka's transactional API asks: a retriable commit is
retried, an abortable error aborts and rewinds the consumer to the group's committed offsets, a
fatal one (the producer was fenced) replaces the producer, which fences the old one, and rewinds.
An abort refused because no transaction is open any more (it ended while a call was being retried)
only rewinds: the group's committed offsets tell whether it committed.
``send_offsets_to_transaction`` can block past its timeout in librdkafka when the group coordinator
moves or is down (confluentinc/librdkafka#5456, #5511): a call stuck so is left behind and its
producer replaced, as after a fatal error.
``committed_offsets`` is the input position the last successful commit stored (or the rewind
found), so callers know when everything up to some end is copied whatever failed on the way.
``read_values`` reads a topic back at an isolation level, ``stable_end_offsets`` waits until no
transaction is open on a topic.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, TopicPartition

log = logging.getLogger("transactional_copy")
API_TIMEOUT_S = 15  # each transactional call; a retriable timeout is retried (see _retrying)


STUCK_GRACE_S = 10  # beyond a call's own timeout, before it counts as stuck
COORDINATOR_MOVE_S = 30  # how long coordinator errors are retried (a session timeout and an election)
COORDINATOR_MOVING = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                KafkaError.COORDINATOR_LOAD_IN_PROGRESS})


class StuckClientCall(Exception):
    """A librdkafka call that did not return within its own timeout and a grace period."""


def _bounded(call: Callable[[], Any], timeout: float, name: str) -> None:
    """Run ``call`` in a thread of its own; StuckClientCall if it has not returned after ``timeout``
    (the thread is left behind: a blocked librdkafka call cannot be interrupted)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed to the caller
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True, name=f"librdkafka-{name}")
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise StuckClientCall(f"{name} did not return within {timeout:.0f}s")
    if outcome[0] is not None:
        raise outcome[0]


def _abortable(exc: BaseException) -> bool:
    """An error after which the same producer aborts and goes on (not fatal, not stuck)."""
    return isinstance(exc, KafkaException) and not exc.args[0].fatal()


def _no_transaction_open(exc: BaseException) -> bool:
    """librdkafka's _STATE answer when no transaction is open any more: the one a call failed in
    ended meanwhile (a retried commit that completed, an abort that did); nothing is left to abort."""
    return isinstance(exc, KafkaException) and exc.args[0].code() == KafkaError._STATE \
        and exc.args[0].str().endswith("in state Ready")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KafkaException):
        error: KafkaError = exc.args[0]
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


class TransactionalCopier(threading.Thread):
    def __init__(self, bootstrap: str, source: str, destination: str, group: str, transactional_id: str,
                 batch: int = 1000, transaction_timeout_ms: int = 10000, rate: float | None = None,
                 client_config: Mapping[str, Any] = {}, client_log: logging.Logger | None = None,
                 on_commit: Callable[[float, float, dict[int, int]], None] | None = None,
                 abort_every: int | None = None) -> None:
        """``rate``: at most this many records a second (so faults land in the middle of a copy);
        ``abort_every``: every so many transactions is written out (flushed) and then aborted on
        purpose, as a failed transformation would, so the output always holds aborted data;
        ``client_log``: where librdkafka's log goes; ``on_commit(issued, completed, offsets)``: each
        successful commit (wall-clock seconds, input partition -> next offset)."""
        super().__init__(daemon=True, name=f"copier-{transactional_id}")
        self.bootstrap, self.source, self.destination = bootstrap, source, destination
        self.group, self.transactional_id, self.batch = group, transactional_id, batch
        self.transaction_timeout_ms = transaction_timeout_ms
        self.rate = rate
        self.abort_every = abort_every
        self.transactions = 0
        self.records_committed = 0
        self.client_config = dict(client_config)
        self.committed_offsets: dict[int, int] = {}  # input partition -> next offset to copy, as committed
        self.commits = self.aborts = self.fenced = self.planned_aborts = 0
        self.errors: list[str] = []  # every error handled, for the test's report
        self.failure: BaseException | None = None  # what ended the loop, if not stop()
        self._stopping = threading.Event()
        self._client_log = client_log or logging.getLogger(f"transactional_copy.{transactional_id}")
        self._on_commit = on_commit

    # --- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 1000, **self.client_config}, logger=self._client_log)
        producer = None
        try:
            consumer.subscribe([self.source])
            producer = self._new_producer()
            start = time.monotonic()
            while not self._stopping.is_set():
                messages = [m for m in consumer.consume(self.batch, 0.5) if not m.error()]
                if messages:
                    producer = self._copy(consumer, producer, messages)
                if self.rate:
                    ahead = self.records_committed / self.rate - (time.monotonic() - start)
                    self._stopping.wait(max(ahead, 0))
        except BaseException as exc:  # the test reports it
            self.failure = exc
            log.exception("copier %s stopped", self.transactional_id)
        finally:
            if producer is not None:
                try:
                    producer.flush(10)
                except KafkaException as exc:  # a producer already failed: its error is the report's
                    self.errors.append(f"at stop: {exc.args[0].name()}: {exc.args[0].str()}")
            consumer.close()

    def _new_producer(self) -> confluent_kafka.Producer:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
            "transaction.timeout.ms": self.transaction_timeout_ms, "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000, **self.client_config}, logger=self._client_log)
        self._retrying(lambda: producer.init_transactions(API_TIMEOUT_S))
        return producer

    def _copy(self, consumer: confluent_kafka.Consumer, producer: confluent_kafka.Producer,
              messages: list[Any]) -> confluent_kafka.Producer:
        """One transaction; the producer to go on with (a new one after a fatal error)."""
        issued = time.time()
        try:
            producer.begin_transaction()
            for message in messages:
                self._produce(producer, message)
            positions = consumer.position(consumer.assignment())
            metadata = consumer.consumer_group_metadata()
            _bounded(lambda: producer.send_offsets_to_transaction(positions, metadata, API_TIMEOUT_S),
                     API_TIMEOUT_S + STUCK_GRACE_S, "send_offsets_to_transaction")
            self.transactions += 1
            if self.abort_every and self.transactions % self.abort_every == 0:
                producer.flush(API_TIMEOUT_S)  # the records reach the log, then the abort marker follows them
                self._retrying(lambda: producer.abort_transaction(API_TIMEOUT_S))
                self.planned_aborts += 1
                self._rewind(consumer)
                return producer
            self._retrying(lambda: producer.commit_transaction(API_TIMEOUT_S))
        except (KafkaException, StuckClientCall) as exc:
            self.errors.append(_describe(exc))
            if self._stopping.is_set():
                return producer  # stopping: the coordinator aborts what is left open on its timeout
            if _abortable(exc) and not _no_transaction_open(exc):
                self.aborts += 1
                try:
                    self._retrying(lambda: producer.abort_transaction(API_TIMEOUT_S))
                except KafkaException as abort_failure:  # fenced meanwhile (the transaction timed out)
                    self.errors.append(_describe(abort_failure))
                    if _no_transaction_open(abort_failure):
                        pass  # it ended meanwhile: the group's offsets say how (the rewind below)
                    elif _abortable(abort_failure):
                        raise
                    else:
                        exc = abort_failure
            if not _abortable(exc):
                self.fenced += 1
                producer = self._new_producer()  # bumps the epoch: the old producer can write nothing more
            self._rewind(consumer)
            return producer
        self.commits += 1
        self.records_committed += len(messages)
        offsets = {tp.partition: tp.offset for tp in positions if tp.offset >= 0}
        self.committed_offsets.update(offsets)
        if self._on_commit is not None:
            self._on_commit(issued, time.time(), offsets)
        return producer

    def _produce(self, producer: confluent_kafka.Producer, message: Any) -> None:
        while True:
            try:
                producer.produce(self.destination, message.value(), message.key(), partition=message.partition())
                return
            except BufferError:
                producer.poll(0.05)

    def _rewind(self, consumer: confluent_kafka.Consumer) -> None:
        """Back to what the group committed: what the aborted transaction read is read again."""
        committed = self._retrying(lambda: consumer.committed(consumer.assignment(), API_TIMEOUT_S))
        for tp in committed:
            if tp.offset >= 0:
                consumer.seek(tp)
                self.committed_offsets[tp.partition] = tp.offset
            else:
                consumer.seek(TopicPartition(tp.topic, tp.partition, confluent_kafka.OFFSET_BEGINNING))

    def _retrying(self, call: Any, attempts: int = 20) -> Any:
        """librdkafka's retriable errors (a timeout) are retried as it advises, and so, for up to
        COORDINATOR_MOVE_S, are the group coordinator's errors that consumer calls such as
        ``committed()`` hand back while the coordinator moves (Java's consumer retries those itself)."""
        deadline = time.monotonic() + COORDINATOR_MOVE_S
        attempt = 0
        while True:
            try:
                return call()
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                attempt += 1
                moving = error.code() in COORDINATOR_MOVING and time.monotonic() < deadline
                if not (error.retriable() and attempt < attempts or moving) or self._stopping.is_set():
                    raise
                self.errors.append(f"retried {error.name()}")
                time.sleep(0.2)

    # --- control --------------------------------------------------------------------------------
    def copied_up_to(self, ends: Mapping[int, int]) -> bool:
        """Whether the committed input position has reached ``ends`` on every partition."""
        if self.failure is not None:
            raise AssertionError(f"the copier stopped: {self.failure!r}; errors {self.errors[-5:]}")
        return all(self.committed_offsets.get(p, 0) >= end for p, end in ends.items())

    def stop(self, timeout: float = 60.0) -> None:
        """Stop after the call in progress (at most ``API_TIMEOUT_S`` or so); AssertionError if still running."""
        self._stopping.set()
        self.join(timeout)
        if self.is_alive():
            frame = sys._current_frames().get(self.ident or -1)
            where = "".join(traceback.format_stack(frame)[-3:]) if frame else "?"
            raise AssertionError(f"the copier did not stop within {timeout}s (errors: {self.errors[-3:]}), in:\n{where}")


def watermarks(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """Each partition's end for ``isolation``: the last stable offset under read_committed, else the
    high watermark (librdkafka's ListOffsets carries the consumer's isolation level)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks",
                                         "isolation.level": isolation})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def stable_end_offsets(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, int]:
    """Wait until no transaction is open on any partition (LSO = high watermark) and return the ends."""
    deadline = time.monotonic() + timeout
    while True:
        committed = watermarks(bootstrap, topic, partitions, "read_committed")
        if committed == watermarks(bootstrap, topic, partitions, "read_uncommitted"):
            return committed
        assert time.monotonic() < deadline, f"{topic} still has open transactions after {timeout}s: LSO {committed}"
        time.sleep(0.2)


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 120.0
                ) -> dict[int, list[bytes]]:
    """Every value of each partition from its start to its end at ``isolation``, in offset order; under
    read_committed, once no transaction is open any more."""
    if isolation == "read_committed":
        stable_end_offsets(bootstrap, topic, partitions, timeout)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "read-values",
                                         "isolation.level": isolation, "enable.auto.commit": False,
                                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        read: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        pending = set(range(partitions))
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(10000, 0.5):
                if message.error():
                    assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                    pending.discard(message.partition())
                else:
                    read[message.partition()].append(message.value())
        assert not pending, f"partitions {sorted(pending)} of {topic} not read to their end in {timeout}s"
        return read
    finally:
        consumer.close()
