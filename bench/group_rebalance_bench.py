"""Rebalances of the classic and the consumer (KIP-848) group protocol, on the same broker, in one run.

For groups of 1, 10 and 50 librdkafka members on a 64-partition topic under a steady producer:

- join: time from a new member's subscribe until the group again covers every partition, balanced;
- leave: the same after a member closes;
- pause: the longest time any member that kept all of its partitions went without a record while
  the group rebalanced (the consumer protocol's aim: only the moved partitions stop);
- moved: partitions revoked during the join (the minimum is the newcomer's share);
- roll: records per second consumed while every member of a 10-member group is replaced one by one,
  against the steady rate before.

``--kafka`` adds Kafka 3.9 (``../shared/kafka-cli``) with the classic protocol, the only one it
serves in ZooKeeper mode. Each protocol uses the clients' default timings (heartbeat interval 3 s
classic, 5 s from the broker for the consumer protocol). Numbers go to stdout as a Markdown table
and, with ``--json PATH``, as JSON for ``bench/charts.py``.

    python bench/group_rebalance_bench.py [--sizes 1,10,50] [--kafka] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_json  # noqa: E402
from tests.harness.broker import BrokerProcess  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

PARTITIONS = 64
RATE = 2000  # records per second produced throughout


@dataclass
class Row:
    broker: str
    protocol: str
    members: int
    join_s: float
    leave_s: float
    pause_s: float
    moved: int
    share: int
    roll_rate: float | None = None
    steady_rate: float | None = None


class Group:
    """librdkafka members of one group, each polling in its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        self.bootstrap, self.group, self.topic, self.protocol = bootstrap, group, topic, protocol
        self.members: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.revoked = 0
        self.consumed = 0

    def add(self) -> dict[str, Any]:
        from confluent_kafka import Consumer

        settings = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": self.protocol,
                    "auto.offset.reset": "latest", "enable.auto.commit": True}
        if self.protocol == "classic":
            settings["partition.assignment.strategy"] = "cooperative-sticky"
        member: dict[str, Any] = {"owned": set(), "last": time.monotonic(), "max_gap": 0.0, "stop": threading.Event()}

        def assigned(_: Any, partitions: list[Any]) -> None:
            with self.lock:
                member["owned"] |= {tp.partition for tp in partitions}

        def revoked(_: Any, partitions: list[Any]) -> None:
            with self.lock:
                member["owned"] -= {tp.partition for tp in partitions}
                self.revoked += len(partitions)

        consumer = Consumer(settings)
        consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)

        def run() -> None:
            while not member["stop"].is_set():
                message = consumer.poll(0.05)
                if message is not None and message.error() is None:
                    now = time.monotonic()
                    member["max_gap"] = max(member["max_gap"], now - member["last"])
                    member["last"] = now
                    with self.lock:
                        self.consumed += 1
            consumer.close()

        member["thread"] = threading.Thread(target=run, daemon=True)
        member["thread"].start()
        self.members.append(member)
        return member

    def remove(self, index: int = 0) -> dict[str, Any]:
        member = self.members.pop(index)
        member["stop"].set()
        member["thread"].join(60)
        return member

    def balanced(self) -> bool:
        with self.lock:
            owned = [m["owned"] for m in self.members]
        sizes = [len(o) for o in owned]
        union = set().union(*owned) if owned else set()
        return len(union) == PARTITIONS == sum(sizes) and max(sizes) - min(sizes) <= 1

    def wait_balanced(self, timeout: float = 300.0) -> float:
        start = time.monotonic()
        while not self.balanced():
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"{self.protocol} group of {len(self.members)} never balanced")
            time.sleep(0.02)
        return time.monotonic() - start

    def close(self) -> None:
        while self.members:
            self.remove()


def producer_thread(bootstrap: str, topic: str, stop: threading.Event) -> threading.Thread:
    from confluent_kafka import Producer

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        sent = 0
        start = time.monotonic()
        while not stop.is_set():
            producer.produce(topic, b"x" * 100, partition=sent % PARTITIONS)
            sent += 1
            if sent % 100 == 0:
                producer.poll(0)
                delay = start + sent / RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        producer.flush(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def measure(broker: BrokerProcess, name: str, protocol: str, size: int) -> Row:
    topic, group_id = f"rebalance-{protocol}-{size}", f"g-{protocol}-{size}"
    broker.create_topic(topic, PARTITIONS)
    stop = threading.Event()
    producing = producer_thread(broker.bootstrap, topic, stop)
    group = Group(broker.bootstrap, group_id, topic, protocol)
    try:
        for _ in range(size):
            group.add()
        group.wait_balanced()
        time.sleep(2)
        before = {id(m): set(m["owned"]) for m in group.members}
        revoked_before = group.revoked
        for m in group.members:
            m["max_gap"] = 0.0
        newcomer = group.add()
        join_s = group.wait_balanced()
        moved = group.revoked - revoked_before
        # The longest silence, during the join, of a member that kept all it had.
        keepers = [m for m in group.members if m is not newcomer and before[id(m)] <= m["owned"]]
        pause = max((max(m["max_gap"], time.monotonic() - m["last"]) for m in keepers), default=0.0)
        group.remove(0)
        leave_s = group.wait_balanced()
        row = Row(name, protocol, size, round(join_s, 2), round(leave_s, 2), round(pause, 2), moved,
                  PARTITIONS // (size + 1))
        if size == 10:
            row.steady_rate, row.roll_rate = roll(group)
        return row
    finally:
        group.close()
        stop.set()
        producing.join(60)


def roll(group: Group) -> tuple[float, float]:
    """(records/s before, records/s while each member is replaced in turn)."""
    start, consumed = time.monotonic(), group.consumed
    time.sleep(5)
    steady = (group.consumed - consumed) / (time.monotonic() - start)
    start, consumed = time.monotonic(), group.consumed
    for _ in range(len(group.members)):
        group.remove(0)
        group.add()
        group.wait_balanced()
    rolling = (group.consumed - consumed) / (time.monotonic() - start)
    return round(steady), round(rolling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--kafka", action="store_true", help="add Kafka 3.9 (classic protocol)")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        zookeeper = ZooKeeperServer(base_dir=Path(tmp) / "zk")
        zookeeper.start()
        try:
            kinds: list[tuple[str, type[BrokerProcess], list[str]]] = [("ours", BrokerProcess, ["classic", "consumer"])]
            if args.kafka:
                from tests.harness.kafka_broker import KafkaJavaBroker
                kinds.append(("kafka-3.9", KafkaJavaBroker, ["classic"]))
            for name, kind, protocols in kinds:
                broker = kind(zookeeper.connect_string_with_chroot(name), 0, Path(tmp) / name,
                              {"group.initial.rebalance.delay.ms": "0"})
                broker.start()
                try:
                    for protocol in protocols:
                        for size in sizes:
                            rows.append(measure(broker, name, protocol, size))
                            print(rows[-1], flush=True)
                finally:
                    broker.stop()
        finally:
            zookeeper.close()
    print(f"\n{command}\nmachine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"load average at end {os.getloadavg()[0]:.1f}\n")
    print("| broker | protocol | members | join (s) | leave (s) | longest pause of a member that kept its "
          "partitions (s) | partitions moved on join (newcomer's share) | records/s steady → during a rolling "
          "replacement |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        roll_cell = f"{r.steady_rate} → {r.roll_rate}" if r.roll_rate is not None else ""
        print(f"| {r.broker} | {r.protocol} | {r.members} | {r.join_s} | {r.leave_s} | {r.pause_s} | "
              f"{r.moved} ({r.share}) | {roll_cell} |")
    if args.json:
        kinds = {f"{r.broker} {r.protocol}": f"{r.broker}, {r.protocol} protocol" for r in rows}
        bench_json.write(args.json, "group_rebalance", "", chart_rows(rows), kinds=kinds)


def chart_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """bench/charts.py's rows: one per group size and measure, one value per broker and protocol."""
    measures = [("join", "join_s", "s"), ("leave", "leave_s", "s"), ("longest pause of a kept member", "pause_s", "s"),
                ("partitions moved on join", "moved", "partitions"), ("records/s during a rolling replacement",
                                                                      "roll_rate", "records/s")]
    out = []
    for size in sorted({r.members for r in rows}):
        for label, field, unit in measures:
            values = {f"{r.broker} {r.protocol}": getattr(r, field) for r in rows
                      if r.members == size and getattr(r, field) is not None}
            if values:
                out.append({"name": f"{size} members: {label}", "unit": unit, "value": values,
                            "higher_is_better": field == "roll_rate"})
    return out

if __name__ == "__main__":
    main()
