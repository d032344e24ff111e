"""The cheapest step beyond one core: several broker processes on one host, each owning partitions.

One broker process runs its request path on one event loop, so it uses about one core (the GIL).
The step that needs no new code is Kafka's own: run N brokers on the machine (distinct ids, ports
and log dirs, one ZooKeeper) and let the controller spread partition leadership over them; clients
follow leaders as with any cluster. This script measures that: for each broker count it starts
the cluster, creates an 8-partition RF=1 topic (leaders spread round-robin) and runs, with
librdkafka:

- unthrottled produce of 100 B and 1 KiB values by ``--producers`` producers (one thread each);
- produce latency p50/p99/p99.9 at ``--rate`` msg/s in all from 10 producers with linger.ms=0
  (about one request per message: the request-rate-bound case that saturates one loop first);

and prints one table with the brokers' CPU per million messages next to each row.

    python bench/multiprocess_bench.py [--brokers 1,2] [--messages 1000000] [--rate 10000] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Producer

from bench import bench_json
from bench.broker_bench import (
    broker_cpu_seconds,
    create_topic,
    paced_latencies,
    percentiles_ms,
    warm_up,
)
from bench.vs_kafka_latency import LATENCY_PRODUCER, parallel_produce
from tests.harness.broker import BrokerCluster
from tests.harness.zookeeper import ZooKeeperServer

PARTITIONS = 8


def cluster_cpu(cluster: BrokerCluster) -> float:
    return sum(broker_cpu_seconds(broker) for broker in cluster.brokers)


Measured = tuple[str, str, float | list[float], float]


def measure(cluster: BrokerCluster, args: argparse.Namespace) -> list[Measured]:
    """(row, unit, value, broker CPU s per 1M messages) for one cluster."""
    rows: list[Measured] = []
    for size in (100, 1024):
        topic = f"throughput-{size}"
        create_topic(cluster.bootstrap, topic, PARTITIONS)
        before = cluster_cpu(cluster)
        count = args.messages if size == 100 else args.messages // 4
        rate = parallel_produce(cluster.bootstrap, topic, count, args.producers, size)
        cpu = (cluster_cpu(cluster) - before) / count * 1e6
        rows.append((f"produce {size} B, {args.producers} producers", "msg/s", rate, cpu))
    topic = "latency"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    producers = [Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, **LATENCY_PRODUCER}) for _ in range(10)]
    for producer in producers:
        warm_up(producer, topic)
    count = int(args.rate * args.seconds)
    before = cluster_cpu(cluster)
    p50, p99, p999 = percentiles_ms(paced_latencies(producers, topic, count, args.rate), 50, 99, 99.9)
    cpu = (cluster_cpu(cluster) - before) / count * 1e6
    rows.append((f"produce latency at {args.rate:,.0f} msg/s, 10 producers", "ms p50/p99/p99.9", [p50, p99, p999], cpu))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="1,2", help="broker counts to compare")
    parser.add_argument("--messages", type=int, default=1_000_000, help="100 B messages per throughput row (a quarter of it for 1 KiB)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=10_000.0)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency row")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    counts = [int(n) for n in args.brokers.split(",")]
    print("command: python bench/multiprocess_bench.py " + " ".join(sys.argv[1:]), flush=True)
    results: dict[int, list[Measured]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        try:
            for n in counts:
                cluster = BrokerCluster(n, f"{zk.connect_string}/cluster-{n}", Path(tmp) / f"cluster-{n}")  # a chroot each
                try:
                    cluster.start()
                    load = os.getloadavg()[0]
                    results[n] = measure(cluster, args)
                    print(f"{n} broker(s) done (load average {load:.2f} at start)", flush=True)
                finally:
                    cluster.stop()
        finally:
            zk.close()
    header = " | ".join(f"{n} broker process(es) | CPU s per 1M" for n in counts)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs\n")
    print(f"| row | {header} |")
    print("| --- |" + " --- | --- |" * len(counts))
    for i, (row, unit, _, _) in enumerate(results[counts[0]]):
        cells = " | ".join(f"{_shown(results[n][i][2])} | {results[n][i][3]:.2f}" for n in counts)
        print(f"| {row}, {unit} | {cells} |")
    if args.json:
        write_json(args.json, counts, results)


def _shown(value: float | list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in value) if isinstance(value, list) else f"{value:,.0f}"


def write_json(path: str, counts: list[int], results: dict[int, list[Measured]]) -> None:
    """One kind per broker count; each row's value, then its broker CPU per million messages."""
    first = results[counts[0]]
    rows = [{"section": "clients' view", "name": row, "unit": unit, "higher_is_better": unit == "msg/s",
             "value": {str(n): results[n][i][2] for n in counts}} for i, (row, unit, _, _) in enumerate(first)]
    rows += [{"section": "broker CPU", "name": row, "unit": "CPU s per 1M messages",
              "value": {str(n): results[n][i][3] for n in counts}} for i, (row, _, _, _) in enumerate(first)]
    kinds = {str(n): f"{n} broker process{'es' if n > 1 else ''}" for n in counts}
    bench_json.write(path, "multiprocess_bench", "", rows, kinds=kinds)


if __name__ == "__main__":
    main()
