"""What replication costs and how long a leader failover takes, on a 3-broker cluster.

Starts its own ZooKeeper (Debian's package) and three broker processes on free ports in a temp
dir, then measures with confluent-kafka (librdkafka):
- produce throughput, 100-byte and 1 KiB values, one partition: RF=1 acks=1 next to RF=3 acks=1
  and RF=3 acks=all with enable.idempotence (messages/s and MB/s; and messages/s until the high
  watermark covered them all, which for RF=3 acks=1 shows how fast the followers kept up);
- produce latency p50/p99 at a fixed rate for RF=1 acks=1 and RF=3 acks=all idempotent;
- failover: an idempotent acks=all producer writes continuously to an RF=3 topic with
  min.insync.replicas=2; the partition leader's broker is SIGKILLed and the time from the kill
  to the first message acknowledged by the new leader is measured (delivery report times; which
  leader appended a message is read back afterwards from its batch's partition leader epoch).
  Between rounds the killed broker is restarted and waited for until it is back in the ISR.
  Afterwards the topic is read back: every acknowledged message must be there exactly once.

    python bench/replication_bench.py [--messages N] [--rate R] [--rounds K] [--producer-config k=v ...]

Everything started is killed at the end, on failure and Ctrl-C too; after a failure (or with --keep)
the temp dir with each broker's broker.log and ZooKeeper's log is kept and its path printed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_json  # noqa: E402
from bench.broker_bench import broker_cpu_seconds, latency, produce  # noqa: E402
from tests.harness.broker import TEST_DEFAULTS, BrokerCluster, BrokerProcess  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

BROKERS = 3
VALUE = b"x" * 100
IDEMPOTENT_ACKS_ALL: dict[str, object] = {"acks": "all", "enable.idempotence": True}
THROUGHPUT_CASES: list[tuple[str, int, dict[str, object]]] = [
    ("RF=1 acks=1", 1, {"acks": 1}),
    ("RF=3 acks=1", 3, {"acks": 1}),
    ("RF=3 acks=all idempotent", 3, IDEMPOTENT_ACKS_ALL),
]
LATENCY_CASES = [THROUGHPUT_CASES[0], THROUGHPUT_CASES[2]]
# Kafka-like client settings, spelled out so the output says what was used: librdkafka's defaults
# (the Java producer's retry backoffs, request timeout and, since Kafka 4.0, linger.ms are the same).
FAILOVER_PRODUCER: dict[str, object] = {
    **IDEMPOTENT_ACKS_ALL, "linger.ms": 5, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
    "request.timeout.ms": 30000, "message.timeout.ms": 300000, "topic.metadata.refresh.interval.ms": 300000,
}


class BenchError(RuntimeError):
    """The cluster did something the benchmark cannot measure around (a lost message, a timeout)."""


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = condition()
        except OSError:  # a broker answering metadata went away meanwhile: ask again
            result = None
        if result:
            return result
        time.sleep(0.05)
    raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def running_cluster(overrides: Mapping[str, str], keep: bool) -> Iterator[BrokerCluster]:
    """ZooKeeper and the brokers in a temp dir, all killed on the way out (Ctrl-C included); the dir,
    with their logs, is kept after a failure or when asked."""
    tmp = Path(tempfile.mkdtemp(prefix="replication-bench-"))
    zk = ZooKeeperServer(tmp / "zk")
    cluster = BrokerCluster(BROKERS, zk.connect_string, tmp, overrides)
    failed = False
    try:
        zk.start()
        cluster.start()
        yield cluster
    except Exception:
        failed = True
        raise
    finally:
        cluster.kill()
        zk.stop()
        if failed or keep:
            print(f"logs kept in {tmp} (broker-N/broker.log, zk/zookeeper.log)", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def partition_state(cluster: BrokerCluster, topic: str, exclude: BrokerProcess | None = None) -> Any:
    """Partition 0 as the first running broker (other than ``exclude``) sees it, with the controller id."""
    observer = next(b for b in cluster.brokers if b.process is not None and b is not exclude)
    response = observer.metadata([topic])
    topics = response.topics
    if not topics or topics[0].error_code or not topics[0].partitions:
        return None
    return response.controller_id, topics[0].partitions[0]


def wait_high_watermark(bootstrap: str, topic: str, at_least: int, timeout: float = 60.0) -> tuple[int, float]:
    """Poll partition 0's high watermark until it reaches ``at_least``: returns it and the seconds waited."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-bench"})
    start = time.perf_counter()
    try:
        while (high := consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]) < at_least:
            if time.perf_counter() - start > timeout:
                raise BenchError(f"the high watermark of {topic}-0 is {high} after {timeout:.0f} s, "
                                 f"expected {at_least}")
            time.sleep(0.005)
        return high, time.perf_counter() - start
    finally:
        consumer.close()


def throughput(cluster: BrokerCluster, messages: int) -> list[tuple[str, float, float, float]]:
    """(test, messages/s, MB/s, messages/s until the high watermark covered them all) per case."""
    rows = []
    for size in (100, 1024):
        for label, rf, config in THROUGHPUT_CASES:
            topic = f"throughput-{size}-rf{rf}-{config['acks']}"
            cluster.brokers[0].create_topic(topic, 1, rf)
            seconds = produce(cluster.bootstrap, topic, messages, size, config, warm=True)
            # with acks=1 the followers may still be catching up: the high watermark follows them
            _, behind = wait_high_watermark(cluster.bootstrap, topic, messages + 1)  # + the warm-up message
            rows.append((f"produce {size} B, {label}", messages / seconds, messages * size / 1e6 / seconds,
                         messages / (seconds + behind)))
    return rows


@dataclass
class Ack:
    at: float  # time.monotonic() in the delivery report
    number: int
    offset: int


class ContinuousProducer(threading.Thread):
    """Sends numbered messages at a steady rate until stopped; records when each was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate: float, config: Mapping[str, object]) -> None:
        super().__init__(daemon=True, name="continuous-producer")
        self.topic, self.rate = topic, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, **config})
        self.acks: list[Ack] = []
        self.failures: list[tuple[int, str]] = []
        self.sent = 0
        self.undelivered = 0
        self._stopping = threading.Event()
        self._aborting = threading.Event()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acks.append(Ack(time.monotonic(), int(msg.key()), msg.offset()))
        else:
            self.failures.append((int(msg.key()), str(err)))

    def run(self) -> None:
        start = time.monotonic()
        while not self._stopping.is_set():
            key = str(self.sent).encode()
            try:
                self.producer.produce(self.topic, VALUE, key=key, partition=0, on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            next_at = start + self.sent / self.rate
            while (pause := next_at - time.monotonic()) > 0:  # delivery reports run in here, promptly
                self.producer.poll(pause)
            self.producer.poll(0)
        if self._aborting.is_set():
            self.producer.purge()
        self.undelivered = self.producer.flush(0 if self._aborting.is_set() else 120)

    def acked_since(self, moment: float) -> int:
        return sum(1 for _ in itertools.takewhile(lambda ack: ack.at > moment, reversed(self.acks)))

    def stop(self) -> None:
        self._stopping.set()
        self.join(180)
        if self.is_alive():
            raise BenchError("the producer did not finish flushing within 180 s")

    def abort(self) -> None:
        """Stop without waiting for what is still queued (the benchmark failed already)."""
        self._aborting.set()
        self._stopping.set()
        self.join(10)


@dataclass
class Round:
    victim: int
    was_controller: bool
    killed_at: float
    killed_wall: float  # time.time() of the kill, to find it in the brokers' logs
    new_leader: int
    leader_seen_after: float  # seconds from the kill until a surviving broker's metadata named it
    failover: float | None = None  # seconds from the kill to the first ack by the new leader


def read_back(bootstrap: str, topic: str, end: int) -> dict[int, tuple[int, int | None]]:
    """offset -> (message number, partition leader epoch of its batch) for all of partition 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-bench",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    read: dict[int, tuple[int, int | None]] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 120
        while len(read) < end and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1):
                if msg.error() is None:
                    read[msg.offset()] = (int(msg.key()), msg.leader_epoch())
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise BenchError(f"reading {topic} back: {msg.error()}")
    finally:
        consumer.close()
    return read


def failover(cluster: BrokerCluster, rounds: int, rate: float, steady: float,
             config: Mapping[str, object]) -> tuple[list[Round], int, list[str]]:
    """Kill the leader ``rounds`` times under load: the rounds, how many messages were acknowledged,
    and what went wrong with them."""
    topic = "failover"
    cluster.brokers[0].create_topic(topic, 1, BROKERS, {"min.insync.replicas": "2"})
    brokers = {b.broker_id: b for b in cluster.brokers}
    producer = ContinuousProducer(cluster.bootstrap, topic, rate, config)
    producer.start()
    results: list[Round] = []
    try:
        for _ in range(rounds):
            wait_for(lambda: (s := partition_state(cluster, topic)) and len(s[1].isr_nodes) == BROKERS,
                     f"all {BROKERS} replicas of {topic}-0 in the ISR")
            started = time.monotonic()
            wait_for(lambda: producer.acked_since(started) >= rate * steady * 0.9,
                     f"{steady:.0f} s of acknowledged writes before the kill")
            controller, state = wait_for(lambda: (s := partition_state(cluster, topic)) and s[1].leader_id >= 0 and s,
                                         f"the leader of {topic}-0")
            victim = brokers[state.leader_id]
            killed_at, killed_wall = time.monotonic(), time.time()
            victim.kill()
            _, new_state = wait_for(
                lambda: (s := partition_state(cluster, topic, exclude=victim))
                and s[1].leader_id not in (-1, victim.broker_id) and s,
                f"a new leader of {topic}-0 after killing broker {victim.broker_id}")
            leader_seen = time.monotonic()
            results.append(Round(victim.broker_id, controller == victim.broker_id, killed_at, killed_wall,
                                 new_state.leader_id, leader_seen - killed_at))
            # acks right after the kill may still come from the old leader; these come from the new one
            wait_for(lambda: producer.acked_since(leader_seen) > 0, "acknowledgements from the new leader")
            victim.wait_until_deregistered()
            victim.start()
        producer.stop()
    finally:
        if producer.is_alive():
            producer.abort()
    return results, len(producer.acks), check_and_time(cluster.bootstrap, topic, producer, results)


def check_and_time(bootstrap: str, topic: str, producer: ContinuousProducer, rounds: list[Round]) -> list[str]:
    """Fill in each round's failover time from the leader epochs read back; returns what went wrong with
    the acknowledged messages (nothing, when every one is there once, in order, at its offset)."""
    if producer.failures:
        raise BenchError(f"{len(producer.failures)} deliveries failed, first: {producer.failures[:3]}")
    if producer.undelivered:
        raise BenchError(f"{producer.undelivered} messages were never acknowledged")
    end, _ = wait_high_watermark(bootstrap, topic, 0)
    read = read_back(bootstrap, topic, end)
    numbers = [number for number, _ in read.values()]
    acked = {ack.number: ack.offset for ack in producer.acks}
    lost = [n for n, offset in acked.items() if read.get(offset, (None,))[0] != n]
    problems = []
    if len(read) != end:
        problems.append(f"read {len(read)} of {end} offsets")
    if len(numbers) != len(set(numbers)):
        problems.append(f"{len(numbers) - len(set(numbers))} duplicates")
    if lost:
        problems.append(f"{len(lost)} acknowledged messages not at their acknowledged offset "
                        f"(first numbers: {sorted(lost)[:5]})")
    if sorted(numbers) != numbers:
        problems.append("messages out of order")
    epoch_at = {offset: epoch for offset, (_, epoch) in read.items()}
    for r in rounds:  # acks are in delivery-report order, which is time order
        old_epoch = next(epoch_at.get(a.offset) for a in reversed(producer.acks) if a.at < r.killed_at)
        if old_epoch is None:
            raise BenchError(f"no leader epoch on the record batch of the last ack before round {r}")
        r.failover = next((a.at - r.killed_at for a in producer.acks if a.at > r.killed_at
                           and (epoch := epoch_at.get(a.offset)) is not None and epoch > old_epoch), None)
    return problems


def parse_config(pairs: list[str]) -> dict[str, object]:
    config: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--producer-config wants key=value, got {pair!r}")
        config[key] = value
    return config


Row = dict[str, Any]  # a row of bench_json's document


def print_throughput(cluster: BrokerCluster, messages: int) -> list[Row]:
    rows: list[Row] = []
    print(f"\nthroughput, {messages:,} messages, 1 partition, linger.ms=5, after one warm-up message:")
    print(f"{'test':<44}{'messages/s':>12}{'MB/s':>10}{'replicated msg/s':>18}")
    for label, per_second, mb, replicated in throughput(cluster, messages):
        print(f"{label:<44}{per_second:>12,.0f}{mb:>10.1f}{replicated:>18,.0f}", flush=True)
        rows += [{"section": "throughput", "name": label, "unit": "msg/s", "value": per_second, "higher_is_better": True},
                 {"section": "throughput", "name": f"{label}, until replicated", "unit": "msg/s", "value": replicated,
                  "higher_is_better": True}]
    print("(replicated: until the high watermark covered every message, i.e. every ISR replica had it)")
    return rows


def print_latency(cluster: BrokerCluster, rate: float, seconds: float) -> list[Row]:
    rows: list[Row] = []
    count = int(rate * seconds)
    print(f"\nproduce latency, {count:,} messages of 100 B at {rate:,.0f} msg/s, linger.ms=0, "
          f"after one warm-up message:")
    print(f"{'test':<44}{'p50 ms':>12}{'p99 ms':>10}  broker CPU µs per message, highest (the leader's) first")
    for label, rf, config in LATENCY_CASES:
        topic = f"latency-rf{rf}-{config['acks']}"
        cluster.brokers[0].create_topic(topic, 1, rf)
        before = [broker_cpu_seconds(b) for b in cluster.brokers]
        p50, p99 = latency(cluster.bootstrap, topic, count, rate, config, warm=True)
        per_message = sorted(((broker_cpu_seconds(b) - cpu) / count * 1e6 for b, cpu in zip(cluster.brokers, before)),
                             reverse=True)
        print(f"{label:<44}{p50:>12.2f}{p99:>10.2f}  " + " / ".join(f"{us:.0f}" for us in per_message), flush=True)
        rows += [{"section": "latency", "name": f"{label} at {rate:,.0f} msg/s", "unit": "ms p50/p99", "value": [p50, p99]},
                 {"section": "latency", "name": f"{label} at {rate:,.0f} msg/s, the leader's CPU",
                  "unit": "µs per message", "value": per_message[0]}]
    return rows


def print_failover(cluster: BrokerCluster, rounds: int, rate: float, steady: float,
                   config: Mapping[str, object]) -> list[Row]:
    print(f"\nfailover: SIGKILL the leader of an RF=3 min.insync.replicas=2 partition while a producer "
          f"sends 100 B at {rate:,.0f} msg/s")
    print(f"producer settings: {dict(config)}")
    results, acked, problems = failover(cluster, rounds, rate, steady, config)
    print(f"{'round':<7}{'killed at (UTC)':<17}{'broker':>6}{'controller?':>13}{'new leader':>12}"
          f"{'in metadata s':>15}{'first ack by new leader s':>27}")
    for i, r in enumerate(results, 1):
        at = time.strftime("%H:%M:%S", time.gmtime(r.killed_wall)) + f".{int(r.killed_wall % 1 * 1000):03d}"
        ack = "none" if r.failover is None else f"{r.failover:.3f}"
        print(f"{i:<7}{at:<17}{r.victim:>6}{'yes' if r.was_controller else 'no':>13}{r.new_leader:>12}"
              f"{r.leader_seen_after:>15.3f}{ack:>27}")
    times = [r.failover for r in results if r.failover is not None]
    if times:
        print(f"median time from kill to first ack by the new leader: {statistics.median(times):.3f} s")
    if problems:
        raise BenchError("acknowledged messages did not survive: " + "; ".join(problems))
    print(f"all {acked:,} acknowledged messages read back exactly once, at their acknowledged offsets, in order")
    return [{"section": "failover", "name": f"SIGKILLed leader: kill to first ack by the new leader, median of {len(times)}",
             "unit": "s", "value": statistics.median(times)}] if times else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per throughput run")
    parser.add_argument("--rate", type=float, default=1000.0, help="messages/s for latency and failover")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="length of each latency run")
    parser.add_argument("--rounds", type=int, default=3, help="leader kills")
    parser.add_argument("--steady-seconds", type=float, default=3.0, help="acknowledged writes before each kill")
    parser.add_argument("--zk-session-timeout-ms", type=int,
                        default=int(TEST_DEFAULTS["zookeeper.session.timeout.ms"]),
                        help="the brokers' zookeeper.session.timeout.ms (Kafka's default: 18000)")
    parser.add_argument("--producer-config", action="append", default=[], metavar="KEY=VALUE",
                        help="librdkafka setting for the failover producer (repeatable)")
    parser.add_argument("--skip", choices=("throughput", "latency", "failover"), action="append", default=[])
    parser.add_argument("--keep", action="store_true", help="keep the temp dir with the logs")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    failover_config = {**FAILOVER_PRODUCER, **parse_config(args.producer_config)}

    print("command: python bench/replication_bench.py " + shlex.join(sys.argv[1:]))
    print(f"cluster: {BROKERS} brokers + 1 ZooKeeper; broker settings: test harness defaults with "
          f"zookeeper.session.timeout.ms={args.zk_session_timeout_ms}; librdkafka {confluent_kafka.libversion()[0]}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    rows: list[Row] = []
    with running_cluster({"zookeeper.session.timeout.ms": str(args.zk_session_timeout_ms)}, args.keep) as cluster:
        if "throughput" not in args.skip:
            rows += print_throughput(cluster, args.messages)
        if "latency" not in args.skip:
            rows += print_latency(cluster, args.rate, args.latency_seconds)
        if "failover" not in args.skip:
            rows += print_failover(cluster, args.rounds, args.rate, args.steady_seconds, failover_config)
    if args.json:
        bench_json.write(args.json, "replication_bench", "", rows)


if __name__ == "__main__":
    main()
