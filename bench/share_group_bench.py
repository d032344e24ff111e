"""Records per second through a share group (KIP-932) against a consumer group, on one broker.

Starts its own ZooKeeper and one broker on free ports in a temp dir. For 1, 4 and 16 consumers on
a topic of 1 and of 8 partitions: the members start, a warm-up record per partition shows that
every partition is being read (a share group starts at the log's end, ``share.auto.offset.reset``
``latest``), then ``--records`` records of 100 bytes are written as fast as the producer goes:

- share: confluent-kafka ``ShareConsumer`` members of one share group in explicit acknowledgement
  mode, accepting every record; the acceptances go to the broker with the next ShareFetch.
  Records/s until the broker has confirmed the acceptance of the last one (the acknowledgement
  commit callback), and the latency from a record's delivery to the client (its acquisition) to
  that confirmation, p50 and p99;
- consumer: the same number of confluent-kafka ``Consumer`` members of a classic consumer group:
  records/s until the last record is consumed.

Rates run from the first write to the last record done, so that neither joining the group nor the
warm-up is measured; the producer writes while the members consume, so a rate near the
producer's own is a bound of this set-up, not of the group.

All members run as threads of this process (librdkafka does the network work in its own threads),
so the figures include the client's cost. A consumer group gives a partition to one member only:
with more members than partitions the others stay idle, which a share group is there to avoid.
Numbers go to stdout as a Markdown table and, with ``--json PATH``, as JSON (bench/bench_json.py;
scripts/gen_docs.py and bench/charts.py make the documentation's table and chart from it).

    python bench/share_group_bench.py [--records N] [--members 1,4,16] [--partitions 1,8] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_json
from bench.broker_bench import create_topic
from tests.harness.broker import BrokerProcess
from tests.harness.zookeeper import ZooKeeperServer

VALUE = b"x" * 100
WARM_UP = b"warm-up"
BROKER_SETTINGS = {"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
                   "share.coordinator.state.topic.replication.factor": "1",
                   "share.coordinator.state.topic.min.isr": "1", "share.coordinator.state.topic.num.partitions": "1"}
RUN_BOUND_S = 120.0


@dataclass
class Row:
    group: str  # share or consumer
    partitions: int
    members: int
    records: int
    records_per_s: float | None  # None: not all records were done within the run's bound
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    poll_errors: int = 0


@dataclass
class _Progress:
    """What the members of one run did, shared between their threads."""

    wanted: int
    warmed: set[int] = field(default_factory=set)  # partitions whose warm-up record arrived
    lock: threading.Lock = field(default_factory=threading.Lock)
    first: float | None = None
    last: float = 0.0
    done: int = 0
    acquired: dict[tuple[int, int], float] = field(default_factory=dict)  # (partition, offset) -> delivered at
    latencies: list[float] = field(default_factory=list)
    finished: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def delivered(self, now: float) -> None:
        if self.first is None:
            self.first = now

    def completed(self, count: int, now: float) -> None:
        self.done += count
        self.last = now
        if self.done >= self.wanted:
            self.finished.set()


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    for n in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def share_member(bootstrap: str, group: str, topic: str, progress: _Progress, stop: threading.Event) -> None:
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})

    def on_commit(offsets: dict[Any, set[int]], error: Any) -> None:
        now = time.monotonic()
        if error is not None:
            return
        with progress.lock:
            count = 0
            for tp, accepted in offsets.items():
                for offset in accepted:
                    delivered = progress.acquired.pop((tp.partition, offset), None)
                    if delivered is not None:
                        progress.latencies.append(now - delivered)
                        count += 1
            progress.completed(count, now)

    consumer.set_acknowledgement_commit_callback(on_commit)
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            try:
                polled = list(consumer.poll(0.2).records())
            except KafkaException as exc:  # a partition error (the state write timed out): poll again
                with progress.lock:
                    progress.errors.append(str(exc.args[0]))
                continue
            now = time.monotonic()
            with progress.lock:
                ours = [m for m in polled if m.value() != WARM_UP]
                progress.warmed.update(m.partition() for m in polled if m.value() == WARM_UP)
                if ours:
                    progress.delivered(now)
                for message in ours:
                    progress.acquired[(message.partition(), message.offset())] = now
            for message in polled:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync(10)
    finally:
        consumer.close()


def consumer_member(bootstrap: str, group: str, topic: str, progress: _Progress, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            polled = [m for m in consumer.consume(500, 0.2) if m.error() is None]
            batch = [m for m in polled if m.value() != WARM_UP]
            with progress.lock:
                progress.warmed.update(m.partition() for m in polled if m.value() == WARM_UP)
            if batch:
                now = time.monotonic()
                with progress.lock:
                    progress.delivered(now)
                    progress.completed(len(batch), now)
    finally:
        consumer.close()


def warm_up(bootstrap: str, topic: str, partitions: int, progress: _Progress) -> None:
    """A warm-up record to each partition until one of each reached a member."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    deadline = time.monotonic() + RUN_BOUND_S
    while True:
        with progress.lock:
            missing = set(range(partitions)) - progress.warmed
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: no warm-up record of partitions {sorted(missing)} arrived")
        for partition in missing:
            producer.produce(topic, WARM_UP, partition=partition)
        producer.flush(10)
        time.sleep(0.5)


def measure(broker: BrokerProcess, kind: str, partitions: int, members: int, records: int) -> Row:
    topic, group = f"bench-{kind}-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    progress, stop = _Progress(records), threading.Event()
    member = share_member if kind == "share" else consumer_member
    threads = [threading.Thread(target=member, args=(broker.bootstrap, group, topic, progress, stop), daemon=True)
               for _ in range(members)]
    for thread in threads:
        thread.start()
    warm_up(broker.bootstrap, topic, partitions, progress)
    progress.first = time.monotonic()  # the clock runs from the first write to the last record done
    produce(broker.bootstrap, topic, partitions, records)
    finished = progress.finished.wait(RUN_BOUND_S)
    stop.set()
    for thread in threads:
        thread.join(30)
    elapsed = max(progress.last - (progress.first or progress.last), 1e-6)
    row = Row(kind, partitions, members, records, round(progress.done / elapsed) if finished else None,
              poll_errors=len(progress.errors))
    if progress.latencies:
        cuts = statistics.quantiles(progress.latencies, n=100)
        row.latency_p50_ms, row.latency_p99_ms = round(cuts[49] * 1000, 1), round(cuts[98] * 1000, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--members", default="1,4,16")
    parser.add_argument("--partitions", default="1,8")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    rows: list[Row] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        zookeeper = ZooKeeperServer(base_dir=Path(tmp) / "zk")
        zookeeper.start()
        try:
            broker = BrokerProcess(zookeeper.connect_string_with_chroot("share-bench"), 0, Path(tmp) / "broker",
                                   BROKER_SETTINGS)
            broker.start()
            try:
                measure(broker, "share", 1, 1, 100)  # creates __share_group_state: not measured
                for partitions in (int(p) for p in args.partitions.split(",")):
                    for members in (int(m) for m in args.members.split(",")):
                        for kind in ("share", "consumer"):
                            rows.append(measure(broker, kind, partitions, members, args.records))
                            print(rows[-1], flush=True)
            finally:
                broker.stop()
        finally:
            zookeeper.close()
    print(f"\n{command}\nload average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after\n")
    print("| partitions | consumers | share group records/s | consumer group records/s | share acquisition → "
          "acknowledgement p50 / p99 (ms) |")
    print("| --- | --- | --- | --- | --- |")
    by_key = {(r.group, r.partitions, r.members): r for r in rows}
    for (kind, partitions, members), share in by_key.items():
        if kind != "share":
            continue
        consumer = by_key.get(("consumer", partitions, members))
        print(f"| {partitions} | {members} | {share.records_per_s} | {consumer.records_per_s if consumer else ''} | "
              f"{share.latency_p50_ms} / {share.latency_p99_ms} |")
    if args.json:
        write_json(args.json, rows)


def write_json(path: Path, rows: list[Row]) -> None:
    """Records/s per (partitions, consumers) for both kinds of group, then the share group's latency."""
    by_key = {(r.group, r.partitions, r.members): r for r in rows}
    shapes = sorted({(r.partitions, r.members) for r in rows})
    name = "{} partition(s), {} consumer(s)".format
    table = [{"section": "throughput", "name": name(p, m), "unit": "records/s", "higher_is_better": True,
              "value": {kind: getattr(by_key.get((kind, p, m)), "records_per_s", None) for kind in ("share", "consumer")}}
             for p, m in shapes]
    table += [{"section": "share group: acquisition to confirmed acceptance", "name": name(p, m),
               "unit": "ms p50/p99", "value": {"share": [by_key[("share", p, m)].latency_p50_ms,
                                                          by_key[("share", p, m)].latency_p99_ms]}}
              for p, m in shapes if ("share", p, m) in by_key and by_key[("share", p, m)].latency_p50_ms is not None]
    bench_json.write(path, "share_group_bench", "", table, kinds={"share": "share group", "consumer": "consumer group"})


if __name__ == "__main__":
    main()
