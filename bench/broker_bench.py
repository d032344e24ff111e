"""Produce/consume throughput and produce latency of one broker, driven by librdkafka.

Starts its own ZooKeeper (Debian's package) and one broker process on free ports in a temp
dir, then measures with confluent-kafka (librdkafka):
- produce, acks=1, 100-byte and 1 KiB values, to 1 and 8 partitions: messages/s and MB/s;
- consume of what was produced (assign(), from offset 0): messages/s and MB/s;
- produce latency p50/p99 at a fixed moderate rate (acks=1, one message in flight at a time
  per delivery report, linger 0).

    python bench/broker_bench.py [--messages N] [--rate R]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.harness.broker import BrokerProcess  # noqa: E402
from bench import bench_json  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402


def process_tree(pid: int) -> list[int]:
    """The process and its live descendants (a broker's cleaner processes)."""
    pids = [pid]
    for parent in pids:  # grows while it is walked
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                pids.extend(int(child) for child in (task / "children").read_text().split())
            except FileNotFoundError:
                pass
    return pids


def broker_cpu_seconds(broker: BrokerProcess) -> float:
    """User + system CPU the broker process and its children (the cleaner processes) have used:
    the cost of a run whatever else loads the machine."""
    assert broker.process is not None
    total = 0
    for pid in process_tree(broker.process.pid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 1,
                 config: Mapping[str, str] | None = None, replicas: Sequence[int] | None = None) -> None:
    """Create ``name`` and wait for its leaders; ``replicas`` (leader first) places every partition
    on the same brokers instead of spreading them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    placement: dict[str, object] = ({"replica_assignment": [list(replicas)] * partitions} if replicas
                                    else {"replication_factor": replication_factor})
    admin.create_topics([NewTopic(name, partitions, config=dict(config or {}), **placement)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        parts = admin.list_topics(name, timeout=10).topics[name].partitions
        if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{name}: partitions without a leader")


def warm_up(producer: Producer, topic: str) -> None:
    """Send one message and wait for it, so the client's start-up (connections, metadata, an
    idempotent producer's producer id: about 500 ms in librdkafka) is not measured."""
    producer.produce(topic, b"warm-up")
    if producer.flush(30):
        raise RuntimeError(f"the warm-up message to {topic} was not delivered within 30 s")


def produce(bootstrap: str, topic: str, count: int, size: int,
            config: Mapping[str, object] | None = None, warm: bool = False) -> float:
    """Seconds to produce ``count`` values of ``size`` bytes; ``config`` overrides the producer's (acks=1);
    ``warm``: after a ``warm_up`` message (not counted)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000, **(config or {})})
    if warm:
        warm_up(producer, topic)
    payload = b"x" * size
    failures = 0

    def report(err: object, _msg: object) -> None:
        nonlocal failures
        failures += err is not None

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    undelivered = producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures or undelivered:
        raise RuntimeError(f"{failures} deliveries failed, {undelivered} not delivered within 120 s")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, count: int,
            config: Mapping[str, object] | None = None) -> float:
    """Seconds to consume ``count`` messages from offset 0; ``config`` adds consumer settings (security)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, **(config or {})})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    while got < count:
        for msg in consumer.consume(10_000, timeout=5):
            if msg.error() is None:
                got += 1
        if time.perf_counter() - start > 120:
            raise RuntimeError(f"consumed only {got} of {count}")
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def paced_latencies(producers: Sequence[Producer], topic: str, count: int, rate: float,
                    size: int = 100) -> list[float]:
    """Seconds from ``produce()`` to acknowledgement of each of ``count`` values sent at ``rate``/s in
    all, taking turns over ``producers``. Sends follow a schedule (those due are sent, then the
    sender sleeps until the next is due), so a slow acknowledgement does not slow the sending, and
    the client does not spin on a core the broker needs."""
    samples: list[float] = []
    failures: list[object] = []
    payload = b"x" * size

    def report(err: object, msg: Message) -> None:
        if err is None:
            samples.append(msg.latency())
        else:
            failures.append(err)

    start = time.perf_counter()
    sent = 0
    while sent < count:
        due = min(count, int((time.perf_counter() - start) * rate) + 1)
        for i in range(sent, due):
            producer = producers[i % len(producers)]
            producer.produce(topic, payload, on_delivery=report)
            producer.poll(0)
        sent = due
        for producer in producers:
            producer.poll(0)
        wait = sent / rate - (time.perf_counter() - start)
        if wait > 0:
            time.sleep(wait)
    undelivered = sum(producer.flush(30) for producer in producers)
    if failures or undelivered:
        raise RuntimeError(f"{len(failures)} deliveries failed (first: {failures[:1]}), "
                           f"{undelivered} not delivered within 30 s")
    return samples


def percentiles_ms(samples: Sequence[float], *points: float) -> tuple[float, ...]:
    """The ``points`` (e.g. 50, 99, 99.9) of ``samples`` (seconds), in milliseconds."""
    ordered = sorted(samples)
    return tuple(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000 for p in points)


def latency(bootstrap: str, topic: str, count: int, rate: float,
            config: Mapping[str, object] | None = None, warm: bool = False) -> tuple[float, float]:
    """p50/p99 ms of ``count`` sends at ``rate``/s; ``config`` overrides the producer's (acks=1, linger 0);
    ``warm``: after a ``warm_up`` message (not sampled)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, **(config or {})})
    if warm:
        warm_up(producer, topic)
    p50, p99 = percentiles_ms(paced_latencies([producer], topic, count, rate), 50, 99)
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per throughput run")
    parser.add_argument("--rate", type=float, default=1000.0, help="messages/s for the latency run")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    print("command: python bench/broker_bench.py " + " ".join(sys.argv[1:]))
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        broker = BrokerProcess(zk.connect_string, 0, tmp)
        try:
            broker.start()
            print(f"{'test':<34}{'messages/s':>12}{'MB/s':>10}")
            for size in (100, 1024):
                for partitions in (1, 8):
                    topic = f"bench-{size}-{partitions}"
                    create_topic(broker.bootstrap, topic, partitions)
                    mb = args.messages * size / 1e6
                    for verb in ("produce", "consume"):
                        t = (produce(broker.bootstrap, topic, args.messages, size) if verb == "produce"
                             else consume(broker.bootstrap, topic, partitions, args.messages))
                        name = f"{verb} {size} B, {partitions} partition(s)"
                        print(f"{name:<34}{args.messages / t:>12,.0f}{mb / t:>10.1f}")
                        rows.append({"name": name, "unit": "messages/s", "value": args.messages / t, "mb_per_s": mb / t})
            create_topic(broker.bootstrap, "bench-latency", 1)
            p50, p99 = latency(broker.bootstrap, "bench-latency", int(args.rate * 10), args.rate)
            print(f"produce latency at {args.rate:.0f} msg/s (100 B, acks=1): p50 {p50:.2f} ms, p99 {p99:.2f} ms")
            rows.append({"name": f"produce latency at {args.rate:.0f} msg/s, 100 B, acks=1", "unit": "ms p50/p99",
                         "value": [p50, p99]})
            if args.json:
                bench_json.write(args.json, "broker_bench", "", rows)
        finally:
            broker.stop()
            zk.close()


if __name__ == "__main__":
    main()
