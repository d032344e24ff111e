"""Workloads driven by real clients, each bounded in count and time and stopping by itself.

- ``java``: Kafka's ``kafka-verifiable-producer.sh`` (idempotent, acks=all) and two
  ``kafka-verifiable-consumer.sh`` members of one group committing synchronously, as Kafka's own
  system tests drive them; their JSON events are the history.
- ``confluent``: a confluent-kafka (librdkafka) idempotent acks=all producer and a two-member
  group that commits synchronously after every batch (``consumer-protocol``: the same with
  KIP-848's protocol; ``share``: two share-group members accepting every record, KIP-932).

- ``txn``: a librdkafka idempotent producer (as ``confluent``) and an exactly-once copy of its
  topic to another one (``TransactionalCopier``: a read_committed group member and a transactional
  producer, consume-transform-produce with the offsets sent to each transaction; every fifth
  transaction is written out and aborted on purpose, its input copied again by a later one), read
  back at the end both from the log's own batches and markers and by a read_committed consumer.
"""
from __future__ import annotations

import json
import logging
import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.faults.history import (
    Assignment,
    Commit,
    ConsumerHistory,
    GroupRecord,
    LogRecord,
    ProducerHistory,
    TxnLogRecord,
)
from tests.harness.kafka_cli import KafkaCli
from tests.harness.transactional_copy import TransactionalCopier

RATE = 100  # messages/s per producer: enough to see every fault, light enough for two shared cores
ABORT_EVERY = 5  # the copier aborts every fifth transaction on purpose: the copy always holds aborted data
OPEN_TRANSACTION_BOUND = 60.0  # s: a transaction left open must be aborted on its timeout (10 s) by then
WARM_UP = b"warm-up"  # the share workload's records that only show its share-partitions exist
CLIENT_LOG = logging.getLogger("faults.librdkafka")  # librdkafka's complaints during faults go here, not to stderr


@dataclass
class WorkloadSpec:
    """One round's producer count and deadline (both bound the workload)."""
    messages: int
    deadline: float  # time.monotonic() after which everything still running is stopped


class Workload:
    """A producer and a consumer group on one topic."""
    name: str
    producer: ProducerHistory
    consumers: ConsumerHistory
    detail = ""  # what ``check`` found besides violations, for the round's report

    def start(self) -> None:
        raise NotImplementedError

    def producer_done(self) -> bool:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop everything still running (the deadline passed or the consumers caught up)."""
        raise NotImplementedError

    def check(self, bootstrap: str) -> list[str]:
        """What only this workload can check, read back after it stopped (before the common checkers)."""
        return []

    def drained(self, ends: dict[int, int]) -> bool:
        """Whether the group caught up with the topic's end offsets (by its commits)."""
        committed: dict[int, int] = {}
        for commit in list(self.consumers.commits):
            for partition, offset in commit.offsets.items():
                committed[partition] = max(committed.get(partition, 0), offset)
        return all(committed.get(p, 0) >= end for p, end in ends.items() if end > 0)


class _ToolProcess:
    """A Java tool whose stdout lines (JSON events) go to ``on_event`` from a reader thread."""

    def __init__(self, cli: KafkaCli, tool: str, args: list[str], on_event: Any, stderr: Path) -> None:
        with open(stderr, "ab") as errors:
            self.process = cli.popen(tool, args, stdout=subprocess.PIPE, stderr=errors, bufsize=1)
        self._reader = threading.Thread(target=self._read, args=(on_event,), daemon=True)
        self._reader.start()

    def _read(self, on_event: Any) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                try:
                    on_event(json.loads(line))
                except ValueError:
                    continue

    def done(self) -> bool:
        return self.process.poll() is not None

    def stop(self) -> None:
        """SIGTERM (the tools close their clients and print their last events), then SIGKILL."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)


class JavaWorkload(Workload):
    name = "java"

    def __init__(self, cli: KafkaCli, bootstrap: str, topic: str, spec: WorkloadSpec, work_dir: Path) -> None:
        self.cli, self.bootstrap, self.topic, self.spec, self.work_dir = cli, bootstrap, topic, spec, work_dir
        self.producer = ProducerHistory(self.name, topic, prefix="1")  # the tool takes an integer prefix
        self.consumers = ConsumerHistory(self.name, topic, group=f"{topic}-jg")
        self.producer_config = work_dir / "verifiable-producer.properties"
        self.producer_config.write_text(  # the tool sets retries=0 unless told otherwise
            "enable.idempotence=true\nretries=2147483647\nlinger.ms=5\ndelivery.timeout.ms=60000\n")
        self.consumer_config = work_dir / "verifiable-consumer.properties"
        self.consumer_config.write_text("heartbeat.interval.ms=1000\n")
        self._tools: list[_ToolProcess] = []
        self._producer: _ToolProcess | None = None
        self._lock = threading.Lock()
        self._last_consumed: dict[str, float] = {}

    def start(self) -> None:
        for member in ("m0", "m1"):
            self._tools.append(_ToolProcess(self.cli, "kafka-verifiable-consumer", [
                "--bootstrap-server", self.bootstrap, "--topic", self.topic, "--group-id", self.consumers.group,
                "--verbose", "--session-timeout", "10000", "--reset-policy", "earliest",
                "--consumer.config", str(self.consumer_config)],
                lambda event, m=member: self._on_consumer_event(m, event), self.work_dir / f"consumer-{member}.err"))
        self._producer = _ToolProcess(self.cli, "kafka-verifiable-producer", [
            "--bootstrap-server", self.bootstrap, "--topic", self.topic, "--acks", "-1",
            "--max-messages", str(self.spec.messages), "--throughput", str(RATE),
            "--value-prefix", self.producer.prefix, "--producer.config", str(self.producer_config)],
            self._on_producer_event, self.work_dir / "producer.err")
        self._tools.append(self._producer)

    def _on_producer_event(self, event: dict[str, Any]) -> None:
        name = event.get("name")
        if name == "producer_send_success":
            self.producer.sent += 1
            self.producer.acked[event["value"]] = (event["partition"], event["offset"])
        elif name == "producer_send_error":
            self.producer.sent += 1
            self.producer.error(f"{event.get('exception')}: {event.get('message')}")

    def _on_consumer_event(self, member: str, event: dict[str, Any]) -> None:
        name, at = event.get("name"), event.get("timestamp", time.time() * 1000) / 1000
        with self._lock:
            if name == "record_data":
                self.consumers.consumed.append((member, event["partition"], event["offset"], event["value"]))
            elif name == "records_consumed":
                self._last_consumed[member] = at
            elif name == "offsets_committed":
                offsets = {o["partition"]: o["offset"] for o in event.get("offsets") or [] if o["topic"] == self.topic}
                if event.get("success"):
                    # Committed synchronously right after the batch it reports: issued then.
                    self.consumers.commits.append(Commit(member, self._last_consumed.get(member, at), at, offsets))
                else:
                    self.consumers.failed_commits += 1
                    self.consumers.error(str(event.get("error")))
            elif name in ("partitions_assigned", "partitions_revoked"):
                partitions = frozenset(p["partition"] for p in event["partitions"] if p["topic"] == self.topic)
                self.consumers.assignments.append(Assignment(member, at, partitions, name == "partitions_revoked"))

    def producer_done(self) -> bool:
        return self._producer is not None and self._producer.done()

    def stop(self) -> None:
        for tool in self._tools:
            tool.stop()


class ConfluentWorkload(Workload):
    name = "confluent"
    # The classic protocol with the range assignor, quick to notice a dead member.
    group_settings: dict[str, Any] = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                                      "partition.assignment.strategy": "range"}
    full_assignments = True  # each assignment callback carries a member's whole assignment

    def __init__(self, bootstrap: str, topic: str, spec: WorkloadSpec) -> None:
        self.bootstrap, self.topic, self.spec = bootstrap, topic, spec
        self.producer = ProducerHistory(self.name, topic, prefix="c")
        self.consumers = ConsumerHistory(self.name, topic, group=f"{topic}-cg")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._producer_thread = threading.Thread(target=self._produce, daemon=True)
        self._member_threads = [threading.Thread(target=self._consume, daemon=True) for _ in range(2)]

    def start(self) -> None:
        for thread in self._member_threads:
            thread.start()
        self._producer_thread.start()

    def _produce(self) -> None:
        from confluent_kafka import Producer

        def delivered(err: Any, msg: Any) -> None:
            value = msg.value().decode()
            if err is None:
                self.producer.acked[value] = (msg.partition(), msg.offset())
            else:
                self.producer.error(f"{err.name()}: {err.str()}")

        def on_error(err: Any) -> None:
            if err.fatal():
                self.producer.error(f"fatal {err.name()}: {err.str()}")

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 60000, "error_cb": on_error,
                             "logger": CLIENT_LOG})
        start = time.monotonic()
        for n in range(self.spec.messages):
            if self._stop.is_set() or time.monotonic() > self.spec.deadline:
                break
            pause = start + n / RATE - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            try:
                producer.produce(self.topic, value=f"{self.producer.prefix}.{n}".encode(), on_delivery=delivered)
            except BufferError:
                producer.poll(0.1)
                continue
            except Exception as exc:  # a fatal idempotence error makes every later produce fail
                self.producer.error(f"{type(exc).__name__}: {exc}")
                break
            self.producer.sent += 1
            producer.poll(0)
        producer.flush(max(0.0, self.spec.deadline - time.monotonic()))

    def _consume(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.consumers.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": CLIENT_LOG,
                             **self.group_settings})

        def member() -> str:
            return consumer.memberid() or "?"

        def on_assign(c: Any, partitions: list[Any]) -> None:
            with self._lock:
                self.consumers.assignments.append(Assignment(member(), time.time(), frozenset(p.partition for p in partitions)))

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            with self._lock:
                self.consumers.assignments.append(
                    Assignment(member(), time.time(), frozenset(p.partition for p in partitions), revoked=True))

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self._stop.is_set() and time.monotonic() < self.spec.deadline:
                messages = consumer.consume(100, 0.5)
                batch = [m for m in messages if m.error() is None]
                with self._lock:
                    for m in messages:
                        if m.error() is not None:
                            self.consumers.error(str(m.error()))
                    self.consumers.consumed += [(member(), m.partition(), m.offset(), m.value().decode()) for m in batch]
                if not batch:
                    continue
                issued = time.time()
                try:
                    committed = consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    with self._lock:
                        self.consumers.failed_commits += 1
                        self.consumers.error(str(exc.args[0]))
                    continue
                offsets = {tp.partition: tp.offset for tp in committed or [] if tp.error is None and tp.offset >= 0}
                with self._lock:
                    self.consumers.commits.append(Commit(member(), issued, time.time(), offsets))
        finally:
            consumer.close()

    def producer_done(self) -> bool:
        return not self._producer_thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._producer_thread, *self._member_threads):
            thread.join(30)


class ConsumerProtocolWorkload(ConfluentWorkload):
    """The same members with KIP-848's consumer protocol: the coordinator assigns, members reconcile
    incrementally (their assignment callbacks carry only what changes)."""

    name = "consumer-protocol"
    group_settings: dict[str, Any] = {"group.protocol": "consumer"}
    full_assignments = False


class ShareGroupWorkload(ConfluentWorkload):
    """The ``confluent`` producer, and two confluent-kafka ``ShareConsumer`` members of one share
    group (KIP-932) that accept every record they get explicitly and commit the acceptances
    synchronously after every poll. Checked: every acknowledged write is accepted (with the
    broker's confirmation) by exactly one member once, unless it reached the delivery limit, and no
    record is delivered again after its acceptance was confirmed.

    A share-partition starts at the log's end when first fetched (``share.auto.offset.reset`` is
    ``latest``), so the producer writes only once a warm-up record of every partition reached a
    member: from then on every record written is the group's to deliver. Warm-up records are
    accepted and left out of the history."""

    name = "share"
    DELIVERY_LIMIT = 5  # group.share.delivery.count.limit's default

    def __init__(self, bootstrap: str, topic: str, spec: WorkloadSpec) -> None:
        super().__init__(bootstrap, topic, spec)
        self.consumers = ConsumerHistory(self.name, topic, group=f"{topic}-sg")
        self.deliveries: dict[str, list[tuple[float, int]]] = defaultdict(list)  # value -> (time, delivery count)
        self.confirmed: dict[str, list[float]] = defaultdict(list)  # value -> times its acceptance was confirmed
        self.unconfirmed: set[str] = set()  # acceptances the broker did not confirm (they may have applied)
        self._warmed: set[int] = set()  # partitions whose warm-up record reached a member

    def _produce(self) -> None:
        self._warm_up()  # in the producer's thread: the round's other workloads start meanwhile
        super()._produce()

    def _warm_up(self, timeout: float = 60.0) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "logger": CLIENT_LOG})
        partitions = len(producer.list_topics(self.topic, timeout=30).topics[self.topic].partitions)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                missing = set(range(partitions)) - self._warmed
            if not missing:
                return
            for partition in missing:
                producer.produce(self.topic, WARM_UP, partition=partition)
            producer.flush(5)
            self._stop.wait(0.5)
        self.consumers.error(f"share group: warm-up records of {partitions} partitions did not arrive in {timeout} s")

    def _consume(self) -> None:
        from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

        consumer = ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": self.consumers.group,
                                  "share.acknowledgement.mode": "explicit", "logger": CLIENT_LOG})
        name = f"m{uuid.uuid4().hex[:6]}"
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set() and time.monotonic() < self.spec.deadline:
                try:
                    polled = [m for m in consumer.poll(0.5).records()]
                except KafkaException as exc:
                    with self._lock:
                        self.consumers.error(str(exc.args[0]))
                    continue
                batch = [m for m in polled if m.error() is None]
                now = time.time()
                with self._lock:
                    for m in polled:
                        if m.error() is not None:
                            self.consumers.error(str(m.error()))
                    for m in batch:
                        if m.value() == WARM_UP:
                            self._warmed.add(m.partition())
                            continue
                        value = m.value().decode()
                        self.consumers.consumed.append((name, m.partition(), m.offset(), value))
                        self.deliveries[value].append((now, m.delivery_count()))
                for m in batch:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                ours = [m for m in batch if m.value() != WARM_UP]
                if batch:
                    self._commit(consumer, ours)
        finally:
            consumer.close()

    def _commit(self, consumer: Any, batch: list[Any]) -> None:
        from confluent_kafka import KafkaException

        try:
            results = consumer.commit_sync(30)
            failed = {tp.partition for tp, error in results.items() if error is not None}
        except KafkaException as exc:
            failed = {m.partition() for m in batch}
            with self._lock:
                self.consumers.error(str(exc.args[0]))
        done = time.time()
        with self._lock:
            self.consumers.failed_commits += bool(failed)
            for m in batch:
                value = m.value().decode()
                if m.partition() in failed:
                    self.unconfirmed.add(value)
                else:
                    self.confirmed[value].append(done)

    def drained(self, ends: dict[int, int]) -> bool:
        with self._lock:
            return all(v in self.confirmed or v in self.unconfirmed for v in list(self.producer.acked))

    def check(self, bootstrap: str) -> list[str]:
        violations = []
        twice = [v for v, times in self.confirmed.items() if len(times) > 1]
        again = [v for v, times in self.confirmed.items()
                 if any(t > min(times) for t, _count in self.deliveries.get(v, []))]
        never = [v for v in self.producer.acked
                 if v not in self.confirmed and v not in self.unconfirmed
                 and max((c for _t, c in self.deliveries.get(v, [])), default=0) < self.DELIVERY_LIMIT]
        if twice:
            violations.append(f"share group accepted {len(twice)} records more than once, e.g. {twice[:3]}")
        if again:
            violations.append(f"share group delivered {len(again)} records again after their acceptance was "
                              f"confirmed, e.g. {again[:3]}")
        if never:
            violations.append(f"share group never accepted {len(never)} acknowledged writes below the delivery "
                              f"limit, e.g. {never[:3]}")
        redelivered = sum(1 for d in self.deliveries.values() if len(d) > 1)
        self.detail = (f"share: {len(self.confirmed)} accepted, {len(self.unconfirmed - set(self.confirmed))} "
                       f"unconfirmed, {redelivered} delivered more than once")
        return violations


class TransactionalCopyWorkload(ConfluentWorkload):
    """The ``confluent`` producer on the input topic, and an exactly-once copy of it to ``output``."""
    name = "txn"

    def __init__(self, bootstrap: str, topic: str, output: str, spec: WorkloadSpec) -> None:
        super().__init__(bootstrap, topic, spec)
        self.producer.prefix = "t"
        self.consumers = ConsumerHistory(self.name, topic, group=f"{topic}-tg")
        self.output = output
        self.stop_problem = ""
        self.copier = TransactionalCopier(bootstrap, topic, output, self.consumers.group, f"{topic}-copier",
                                          batch=50, client_log=CLIENT_LOG, on_commit=self._committed,
                                          abort_every=ABORT_EVERY)

    def _committed(self, issued: float, completed: float, offsets: dict[int, int]) -> None:
        with self._lock:
            self.consumers.commits.append(Commit("copier", issued, completed, offsets))

    def start(self) -> None:
        self.copier.start()
        self._producer_thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._producer_thread.join(30)
        try:
            self.copier.stop(timeout=90)
        except AssertionError as exc:  # a copier stuck in the cluster's failures is this round's finding
            self.stop_problem = str(exc)

    def check(self, bootstrap: str) -> list[str]:
        from tests.faults.checkers import check_transactional_copy

        violations = [f"copier stopped: {self.copier.failure!r} after {self.copier.errors[-5:]}"] \
            if self.copier.failure is not None else []
        violations += [self.stop_problem] if self.stop_problem else []
        deadline = time.monotonic() + OPEN_TRANSACTION_BOUND
        fates = read_transactional_log(bootstrap, self.output)
        while any(r.state == "open" for r in fates) and time.monotonic() < deadline:
            time.sleep(1.0)  # a transaction of a fenced copier is aborted on its timeout
            fates = read_transactional_log(bootstrap, self.output)
        aborted = sum(r.state == "aborted" for r in fates)
        self.detail = (f"copy: {sum(r.state == 'committed' for r in fates)} committed, {aborted} aborted "
                       f"records in the log; copier: {self.copier.commits} commits, {self.copier.planned_aborts} aborts on "
                       f"purpose, {self.copier.aborts} after errors, {self.copier.fenced} new producers")
        committed_read = [LogRecord(p, o, v.decode() if v is not None else None)
                          for p, o, _, v in read_log(bootstrap, self.output, isolation="read_committed")]
        # What the copy committed is what its group consumed (check_consumed_all: every acknowledged write).
        self.consumers.consumed = [("copier", r.partition, r.offset, r.value or "") for r in committed_read]
        return violations + check_transactional_copy(read_topic(bootstrap, self.producer.topic), fates,
                                                     committed_read)


# --- reading back what the cluster kept ------------------------------------------------------

def read_log(bootstrap: str, topic: str, timeout: float = 60.0, isolation: str = "read_uncommitted"
             ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every record from the log start to the end (the high
    watermark; under read_committed the last stable offset), in offset order within each partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "isolation.level": isolation, "enable.partition.eof": True,
                         "logger": CLIENT_LOG})
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        records = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    records.append((m.partition(), m.offset(), m.key(), m.value()))
                    if m.offset() + 1 >= ends[m.partition()]:
                        pending.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
                    pending.discard(m.partition())  # the end is a marker (consumers never see control records)
        if pending:
            raise AssertionError(f"could not read {topic} partitions {sorted(pending)} to their ends in {timeout}s")
        return records
    finally:
        consumer.close()


def read_transactional_log(bootstrap: str, topic: str, timeout: float = 10.0) -> list[TxnLogRecord]:
    """Every data record of ``topic`` with its fate, from raw read_uncommitted Fetches to each partition's
    leader: a transactional record is committed or aborted by the next marker of its producer."""
    from coordination.blocking_rpc import send_request
    from protocol.messages import FetchRequest, MetadataRequest
    from protocol.records.control import ControlRecordType, parse_control_type
    from protocol.records.log_entry import decode_entry_records, iter_log_entries

    metadata = None
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            metadata = send_request(host, int(port), MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
                3, 12, "faults-checker", timeout)
            break
        except OSError:
            continue
    assert metadata is not None, f"no broker of {bootstrap} answers"
    nodes = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    result: list[TxnLogRecord] = []
    for partition in metadata.topics[0].partitions:
        host, port = nodes[partition.leader_id]
        offset, end = 0, None
        open_records: dict[int, list[TxnLogRecord]] = {}  # producer id -> its records since its last marker
        while end is None or offset < end:
            response = send_request(host, port, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[FetchRequest.FetchTopic(
                    topic=topic, partitions=[FetchRequest.FetchPartition(
                        partition=partition.partition_index, fetch_offset=offset,
                        partition_max_bytes=16 << 20)])]), 1, 12, "faults-checker", timeout)
            data = response.responses[0].partitions[0]
            assert data.error_code == 0, f"{topic}-{partition.partition_index}: Fetch error {data.error_code}"
            end = data.high_watermark
            buf = bytes(data.records or b"")
            if not buf:
                break
            for pos, header in iter_log_entries(buf):
                offset = header.next_offset
                records = list(decode_entry_records(buf, pos))
                if header.is_control:
                    commit = parse_control_type(records[0].key) is ControlRecordType.COMMIT
                    for record in open_records.pop(header.producer_id, []):
                        record.state = "committed" if commit else "aborted"
                    continue
                for r in records:
                    record = TxnLogRecord(partition.partition_index, r.offset,
                                          None if r.value is None else bytes(r.value).decode(), header.producer_id,
                                          "open" if header.is_transactional else "committed")
                    result.append(record)
                    if header.is_transactional:
                        open_records.setdefault(header.producer_id, []).append(record)
    return result


def read_topic(bootstrap: str, topic: str) -> list[LogRecord]:
    return [LogRecord(p, o, v.decode() if v is not None else None) for p, o, _, v in read_log(bootstrap, topic)]


def end_offsets(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-ends", "logger": CLIENT_LOG})
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in partitions}
    finally:
        consumer.close()


def read_group_records(bootstrap: str, groups: set[str], timeout: float = 60.0,
                       topic_names: dict[Any, str] | None = None) -> list[GroupRecord]:
    """The groups' records in ``__consumer_offsets`` (offset commits and group metadata), decoded
    with Kafka's record schemas, in log order per partition (a group lives in one partition). A KIP-848
    group's current-assignment records become, after each, the snapshot of what every member holds
    (assigned or still to revoke), topics named through ``topic_names`` (topic id -> name)."""
    from broker.coordinator.consumer import consumer_group_records as consumer_records
    from protocol import consumer_offsets_records as records
    from protocol.messages import ConsumerProtocolAssignment, message_class

    result = []
    held: dict[str, dict[str, dict[str, list[int]]]] = defaultdict(dict)  # group -> member -> topic -> partitions
    current_key = message_class("ConsumerGroupCurrentMemberAssignmentKey")
    current_value = message_class("ConsumerGroupCurrentMemberAssignmentValue")
    # read_committed: what the group coordinator materialises (an aborted transaction's offsets never count)
    for _, _, key, value in read_log(bootstrap, "__consumer_offsets", timeout, isolation="read_committed"):
        if key is not None and consumer_records.record_type(key) == consumer_records.CURRENT_MEMBER_ASSIGNMENT:
            k = current_key.decode(key[2:], 0)
            if k.group_id not in groups:
                continue
            if value is None:
                held[k.group_id].pop(k.member_id, None)
                continue
            v = current_value.decode(value[2:], 0)
            owned: dict[str, list[int]] = defaultdict(list)
            for tp in [*v.assigned_partitions, *v.partitions_pending_revocation]:
                owned[(topic_names or {}).get(tp.topic_id, str(tp.topic_id))] += list(tp.partitions)
            held[k.group_id][k.member_id] = dict(owned)
            result.append(GroupRecord(k.group_id, generation=v.member_epoch, assignments=dict(held[k.group_id])))
            continue
        if key is None or not records.is_classic_group_key(key):
            continue
        decoded = records.decode_key(key)
        if decoded.group not in groups or value is None:
            continue
        if isinstance(decoded, records.OffsetCommitKey):
            commit = records.decode_offset_commit_value(value)
            result.append(GroupRecord(decoded.group, topic=decoded.topic, partition=decoded.partition,
                                      offset=commit.offset))
        else:
            metadata = records.decode_group_metadata_value(value)
            assignments = {}
            for member in metadata.members:
                owned: dict[str, list[int]] = {}
                if member.assignment:  # a version, then the ConsumerProtocolAssignment of that version
                    version = min(int.from_bytes(member.assignment[:2], "big"), 3)
                    for tp in ConsumerProtocolAssignment.decode(member.assignment[2:], version).assigned_partitions:
                        owned[tp.topic] = list(tp.partitions)
                assignments[member.member_id] = owned
            result.append(GroupRecord(decoded.group, generation=metadata.generation, assignments=assignments))
    return result


def topic_ids(bootstrap: str, topics: list[str], timeout: float = 30.0) -> dict[Any, str]:
    """topic id -> name (KIP-848's records name topics by id)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    described = admin.describe_topics(TopicCollection(topics))
    found = {}
    for name, future in described.items():
        topic_id = future.result(timeout=timeout).topic_id  # confluent-kafka's Uuid: two signed 64-bit halves
        found[uuid.UUID(int=(topic_id.get_most_significant_bits() % (1 << 64)) << 64
                        | topic_id.get_least_significant_bits() % (1 << 64))] = name
    return found
