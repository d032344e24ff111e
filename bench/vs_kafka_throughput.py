"""Throughput rows of bench/vs_kafka.py: produce, then consume the same from offset 0.

For each value size, partition count and durability (RF=1 acks=1, RF=3 acks=all): librdkafka
produces ``messages`` values (``broker_bench.produce``: linger.ms=5, 1 MB batches), one consumer
reads them back (``broker_bench.consume``, ``assign()``), and, with 4 or more partitions, a group
of four does (timed from the moment the group is stable until all are read); Kafka's
``kafka-producer-perf-test`` and ``kafka-consumer-perf-test`` do the same on a topic of their own.
The brokers' CPU seconds per million messages (all brokers of the kind) are recorded next to the
librdkafka rows: on two cores the client often sets the pace, the broker's CPU shows its cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import Consumer, TopicPartition

from bench.broker_bench import consume, produce
from bench.vs_kafka_kinds import BrokerKind
from bench.vs_kafka_run import Run
from bench.vs_kafka_table import Row

JAVA_BATCHING = {"linger.ms": 5, "batch.size": 262144}


@dataclass(frozen=True)
class Durability:
    label: str
    replication_factor: int
    producer: dict[str, object] = field(hash=False)       # the same settings for librdkafka and Java
    topic_config: dict[str, str] = field(hash=False)


DURABILITIES = {
    1: Durability("RF=1 acks=1", 1, {"acks": 1, "enable.idempotence": False}, {}),
    3: Durability("RF=3 acks=all", 3, {"acks": "all", "enable.idempotence": True}, {"min.insync.replicas": "2"}),
}


def java_props(config: dict[str, object]) -> dict[str, object]:
    return {k: str(v).lower() if isinstance(v, bool) else v for k, v in config.items()}


def rows(size: int, partitions: int, durability: Durability, clients: set[str]) -> dict[str, Row]:
    """The rows of one size/partitions/durability combination for ``clients``."""
    what = f"{size} B, {partitions} part., {durability.label}"
    rows = {}
    if "librdkafka" in clients:
        rows["produce"] = Row("throughput, librdkafka", f"produce {what}", "msg/s", True)
        rows["consume"] = Row("throughput, librdkafka", f"consume {what}, 1 consumer", "msg/s", True)
        if partitions >= 4:
            rows["group"] = Row("throughput, librdkafka", f"consume {what}, group of 4", "msg/s", True)
        for op in ("produce", "consume"):
            rows[f"cpu {op}"] = Row("brokers' CPU during the librdkafka rows (all brokers, all threads)",
                                    f"{op} {what}", "CPU s per 1M msgs", False)
    if "java" in clients:
        rows["java produce"] = Row("throughput, Kafka's perf tools", f"produce {what}", "msg/s", True)
        rows["java consume"] = Row("throughput, Kafka's perf tools", f"consume {what}", "msg/s", True)
    return rows


def throughput(kind: BrokerKind, run: Run) -> None:
    plan = run.plan
    for size in plan.sizes:
        for partitions in plan.partitions:
            for rf in plan.replication:
                durability = DURABILITIES[rf]
                row = rows(size, partitions, durability, plan.clients)
                if rf > 1 and kind.replication_unsupported:
                    for r in row.values():
                        run.results.not_available(r, kind.name, kind.replication_unsupported)
                    continue
                topic = f"tp-{size}-{partitions}-rf{rf}-r{run.repeat}"
                if "librdkafka" in plan.clients:
                    run.guarded(kind, [r for k, r in row.items() if not k.startswith("java")],
                                partial(librdkafka_rows, kind, run, topic, size, partitions, durability, row))
                if "java" in plan.clients:
                    run.guarded(kind, [row["java produce"], row["java consume"]],
                                partial(java_rows, kind, run, topic + "-java", size, partitions, durability, row))


def librdkafka_rows(kind: BrokerKind, run: Run, topic: str, size: int, partitions: int,
                    durability: Durability, row: dict[str, Row]) -> None:
    plan, count = run.plan, run.plan.messages
    kind.create_topic(topic, partitions, durability.replication_factor, durability.topic_config)
    try:
        cpu = kind.cpu_seconds()
        with run.profile(kind, f"produce-{size}B-{partitions}p-rf{durability.replication_factor}"):
            seconds = produce(kind.bootstrap, topic, count, size, {**durability.producer, **plan.producer_config},
                              warm=True)
        if "produce" in plan.groups:
            run.results.add(row["produce"], kind.name, count / seconds)
            run.results.add(row["cpu produce"], kind.name, (kind.cpu_seconds() - cpu) * 1e6 / count)
        if "consume" not in plan.groups:
            return
        cpu = kind.cpu_seconds()
        with run.profile(kind, f"consume-{size}B-{partitions}p-rf{durability.replication_factor}"):
            seconds = consume(kind.bootstrap, topic, partitions, count, plan.consumer_config)
        run.results.add(row["consume"], kind.name, count / seconds)
        run.results.add(row["cpu consume"], kind.name, (kind.cpu_seconds() - cpu) * 1e6 / count)
        if "group" in row:
            run.results.add(row["group"], kind.name, count / consume_group(kind.bootstrap, topic, partitions, count,
                                                                         config=plan.consumer_config))
    finally:
        kind.delete_topic(topic)


def java_rows(kind: BrokerKind, run: Run, topic: str, size: int, partitions: int,
              durability: Durability, row: dict[str, Row]) -> None:
    plan, count = run.plan, run.plan.messages
    kind.create_topic(topic, partitions, durability.replication_factor, durability.topic_config)
    try:
        records_per_s, *_ = run.java.produce(kind.bootstrap, topic, count, size, -1,
                                             java_props({**JAVA_BATCHING, **durability.producer}))
        if "produce" in plan.groups:
            run.results.add(row["java produce"], kind.name, records_per_s)
        if "consume" in plan.groups:
            run.results.add(row["java consume"], kind.name, run.java.consume(kind.bootstrap, topic, count))
    finally:
        kind.delete_topic(topic)


def consume_group(bootstrap: str, topic: str, partitions: int, count: int, members: int = 4,
                  timeout: float = 120.0, config: Mapping[str, str] | None = None) -> float:
    """Seconds for a group of ``members`` consumers to read ``count`` messages from offset 0: the
    partitions stay paused until the group is stable (every member assigned), so no rebalance
    happens during the measurement, which runs from the first fetched batch to the last (librdkafka
    starts fetching about 500 ms after a resume, whatever the broker)."""
    assigned: dict[int, int] = {}
    lock = threading.Lock()
    go = threading.Event()
    done = threading.Event()
    got = [0]
    first: list[float] = []  # when the first batch arrived, and its size
    errors: list[BaseException] = []

    def member(i: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-group",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "fetch.max.bytes": 52_428_800, **(config or {})})

        def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
            c.assign(parts)
            if not go.is_set():
                c.pause(parts)
            with lock:
                assigned[i] = len(parts)

        def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
            with lock:
                assigned[i] = 0

        try:
            consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
            resumed = False
            while not done.is_set():
                if go.is_set() and not resumed:
                    consumer.resume(consumer.assignment())
                    resumed = True
                batch = consumer.consume(10_000, timeout=0.1)
                n = sum(1 for m in batch if m.error() is None)
                if n:
                    with lock:
                        if not first:
                            first.extend((time.perf_counter(), n))
                        got[0] += n
                        if got[0] >= count:
                            done.set()
            consumer.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while not (len(assigned) == members and sum(assigned.values()) == partitions and all(assigned.values())):
        if time.monotonic() > deadline or errors:
            done.set()
            raise RuntimeError(f"the group of {members} did not settle: {assigned} {errors[:1]}")
        time.sleep(0.05)
    time.sleep(0.5)  # a last rebalance in flight would show as a member at 0 again
    go.set()
    finished = done.wait(timeout)
    end = time.perf_counter()
    done.set()
    for thread in threads:
        thread.join(30)
    if errors:
        raise RuntimeError(f"a group member failed: {errors[0]!r}")
    if not finished:
        raise RuntimeError(f"the group read {got[0]} of {count} within {timeout} s")
    at, before = first  # the first batch came before the clock started: scale to all ``count``
    return (end - at) * count / max(1.0, got[0] - before)
