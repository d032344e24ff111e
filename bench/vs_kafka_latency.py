"""Latency rows of bench/vs_kafka.py, and the row with 1,000 client connections.

- produce latency p50/p99/p99.9 at fixed rates, 100 B values to one partition, RF=1 acks=1 and
  RF=3 acks=all (min.insync.replicas=2, idempotent): librdkafka (``broker_bench.paced_latencies``,
  linger.ms=0 and 5 requests in flight as the Java producer) and ``kafka-producer-perf-test
  --throughput`` (whole milliseconds); at 10,000 msg/s RF=1 also librdkafka with its default of
  1,000,000 in flight, where each message is a request of its own;
- end-to-end latency p50/p99/p99.9, one 100 B record at a time from send until a consumer has it:
  librdkafka, and ``kafka-e2e-latency`` (whole milliseconds);
- ``connections`` client connections to the leader, all but ``producers`` idle (each sent one
  ApiVersions), while ``producers`` librdkafka producers write to an 8-partition topic:
  throughput unthrottled, and p50/p99/p99.9 at 10,000 msg/s in all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from functools import partial

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.broker_bench import paced_latencies, percentiles_ms, produce, warm_up
from bench.vs_kafka_kinds import BrokerKind
from bench.vs_kafka_run import Run
from bench.vs_kafka_table import Row
from bench.vs_kafka_throughput import DURABILITIES, Durability, java_props
from tests.harness.broker import BrokerConnection

PERCENTILES = "ms p50/p99/p99.9"
CONNECTIONS_RATE = 10_000
# The Java producer's defaults (linger.ms=0, 5 requests in flight): librdkafka's default of 1,000,000
# in flight makes every message its own request at these rates (one row shows that too).
LATENCY_PRODUCER: dict[str, object] = {"linger.ms": 0, "max.in.flight.requests.per.connection": 5}


def produce_latency(kind: BrokerKind, run: Run) -> None:
    plan = run.plan
    for rf in plan.replication:
        durability = DURABILITIES[rf]
        cases: list[tuple[Row, Callable[[], None]]] = []
        topic = f"latency-rf{rf}-r{run.repeat}"
        for rate in plan.rates:
            count = int(rate * plan.latency_seconds)
            what = f"{rate:,} msg/s, {durability.label}"
            if "librdkafka" in plan.clients:
                row = Row("produce latency, librdkafka", what, PERCENTILES, False)
                cases.append((row, partial(librdkafka_latency, kind, run, row, topic, durability, count, rate,
                                           LATENCY_PRODUCER)))
                if rf == 1 and rate == CONNECTIONS_RATE:
                    row = Row("produce latency, librdkafka", f"{what}, a request per message (in-flight 1M)",
                              PERCENTILES, False)
                    cases.append((row, partial(librdkafka_latency, kind, run, row, topic, durability, count, rate,
                                               {"linger.ms": 0})))
            if "java" in plan.clients:
                row = Row("produce latency, kafka-producer-perf-test", what, PERCENTILES, False)
                cases.append((row, partial(java_latency, kind, run, row, topic, durability, count, rate)))
        if rf > 1 and kind.replication_unsupported:
            for row, _ in cases:
                run.results.not_available(row, kind.name, kind.replication_unsupported)
            continue
        kind.create_topic(topic, 1, rf, durability.topic_config)
        try:
            for row, measure in cases:
                run.guarded(kind, [row], measure)
        finally:
            kind.delete_topic(topic)


def librdkafka_latency(kind: BrokerKind, run: Run, row: Row, topic: str, durability: Durability,
                       count: int, rate: int, client: Mapping[str, object]) -> None:
    producer = Producer({"bootstrap.servers": kind.bootstrap, **client, **durability.producer})
    warm_up(producer, topic)
    rf = durability.replication_factor
    with run.profile(kind, "latency " + row.name, followers=rf > 1):
        samples = paced_latencies([producer], topic, count, rate)
    run.results.add(row, kind.name, percentiles_ms(samples, 50, 99, 99.9))


def java_latency(kind: BrokerKind, run: Run, row: Row, topic: str, durability: Durability,
                 count: int, rate: int) -> None:
    _, *p = run.java.produce(kind.bootstrap, topic, count, 100, rate,
                             java_props({"linger.ms": 0, **durability.producer}))
    run.results.add(row, kind.name, tuple(p))


def end_to_end(kind: BrokerKind, run: Run) -> None:
    plan = run.plan
    topic = f"e2e-r{run.repeat}"
    kind.create_topic(topic, 1)
    try:
        if "librdkafka" in plan.clients:
            row = Row("end-to-end latency (acks=1, one record at a time)", "librdkafka", PERCENTILES, False)
            run.guarded(kind, [row], lambda: run.results.add(
                row, kind.name, percentiles_ms(librdkafka_end_to_end(kind.bootstrap, topic, plan.e2e_messages),
                                               50, 99, 99.9)))
        if "java" in plan.clients:
            row = Row("end-to-end latency (acks=1, one record at a time)", "kafka-e2e-latency", PERCENTILES, False)
            run.guarded(kind, [row], lambda: run.results.add(
                row, kind.name, run.java.end_to_end(kind.bootstrap, topic, plan.e2e_messages, 100)))
    finally:
        kind.delete_topic(topic)


def librdkafka_end_to_end(bootstrap: str, topic: str, count: int, size: int = 100) -> list[float]:
    """Seconds from ``produce()`` of each record until the consumer (assigned at the end of the
    partition, long polls as configured by default) returns it; one record at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-e2e", "enable.auto.commit": False})
    warm_up(producer, topic)
    consumer.assign([TopicPartition(topic, 0, 1)])  # after the warm-up record
    payload = b"x" * size
    samples = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            producer.produce(topic, payload)
            producer.poll(0)
            while True:
                msg = consumer.poll(10)
                if msg is None:
                    raise RuntimeError("a record did not arrive within 10 s")
                if msg.error() is None:
                    break
            samples.append(time.perf_counter() - start)
        producer.flush(10)
    finally:
        consumer.close()
    return samples


def connections(kind: BrokerKind, run: Run) -> None:
    plan = run.plan
    section = f"{plan.connections:,} client connections ({plan.connections - plan.producers:,} idle) " \
              f"while {plan.producers} produce, RF=1 acks=1"
    throughput_row = Row(section, "produce 100 B, unthrottled", "msg/s", True)
    latency_row = Row(section, f"produce latency at {CONNECTIONS_RATE:,} msg/s in all", PERCENTILES, False)
    if "librdkafka" not in plan.clients:
        return
    topic = f"connections-r{run.repeat}"
    kind.create_topic(topic, 8)
    port = int(kind.leader.bootstrap.rsplit(":", 1)[1])
    idle: list[BrokerConnection] = []
    try:
        from protocol.messages import ApiVersionsRequest

        for _ in range(plan.connections - plan.producers):
            connection = BrokerConnection(port, client_id="idle")
            connection.request(18, 3, ApiVersionsRequest(client_software_name="idle", client_software_version="1"))
            idle.append(connection)
        run.guarded(kind, [throughput_row], lambda: run.results.add(
            throughput_row, kind.name, parallel_produce(kind.bootstrap, topic, plan.messages, plan.producers)))

        def latency() -> None:
            producers = [Producer({"bootstrap.servers": kind.bootstrap, "acks": 1, **LATENCY_PRODUCER})
                         for _ in range(plan.producers)]
            for producer in producers:
                warm_up(producer, topic)
            count = int(CONNECTIONS_RATE * plan.latency_seconds)
            with run.profile(kind, "connections latency"):
                samples = paced_latencies(producers, topic, count, CONNECTIONS_RATE)
            run.results.add(latency_row, kind.name, percentiles_ms(samples, 50, 99, 99.9))
        run.guarded(kind, [latency_row], latency)
    finally:
        for connection in idle:
            connection.close()
        kind.delete_topic(topic)


def parallel_produce(bootstrap: str, topic: str, count: int, producers: int, size: int = 100) -> float:
    """Messages/s of ``producers`` librdkafka producers (one thread each, each after its warm-up
    message) writing ``count`` values of ``size`` bytes in all: the total over the longest producer's time."""
    seconds: list[float] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            seconds.append(produce(bootstrap, topic, count // producers, size, {"acks": 1}, warm=True))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return count // producers * producers / max(seconds)
