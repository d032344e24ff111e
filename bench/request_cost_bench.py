"""What one request costs the broker: CPU microseconds per request, ours next to Kafka 3.9.

Starts its own ZooKeeper, then each broker kind in turn (this broker, and with ``--kafka`` Apache
Kafka 3.9 from ``../shared/kafka-cli``), and drives it with a raw client on one connection that
keeps ``--in-flight`` requests outstanding, sending prebuilt frames and counting responses (the
client costs next to nothing, so the broker is the limit). For each request kind it prints
requests/s and the broker process's CPU time (user + system, all threads) per request:

- Produce v9 with no partitions: the request path alone (epoll, read, framing, header and body
  decode, a handler, response encode, sendmsg);
- Produce v9 of one 100 B record to one partition, acks=1 (the produce path at one record per
  request, as librdkafka sends with linger.ms=0 at moderate rates);
- Produce v9 of one 100 B record to each of 8 partitions;
- ApiVersions v3 (once per connection for real clients).

The brokers run side by side and take turns within each of ``--rounds`` rounds per row (medians
shown), so a change in the machine's load hits them alike. ``--baseline DIR`` adds our broker as
another checkout has it (``git worktree add /tmp/base HEAD~1``): before/after figures of a change,
measured together. ``--profile FILE`` samples our broker with py-spy (speedscope) during the first
round of the one-record row; ``python bench/vs_kafka_profile.py FILE`` summarises it.

``--in-process`` runs our broker inside this process instead (ZooKeeper still a real one) and
hands the same requests straight to its ``KafkaApis``: the handler path alone (body decode, the
handler, the append, response encode, and the loop callbacks it schedules), without sockets,
processors or a client, so its CPU figures move by a few percent between runs where the socket
rows move by tens (min over seven rounds). For before/after figures of handler changes.

    python bench/request_cost_bench.py [--requests 100000] [--in-flight 16] [--rounds 3] [--kafka]
        [--baseline DIR] [--profile FILE]
    python bench/request_cost_bench.py --in-process [--requests 35000]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.broker_bench import broker_cpu_seconds
from bench.vs_kafka_kinds import KAFKA_HEAP
from bench.vs_kafka_profile import PY_SPY
from protocol.framing import encode_request
from protocol.messages import ApiVersionsRequest, ProduceRequest
from protocol.records.builder import RecordBatchBuilder
from bench import bench_json
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_broker import KAFKA_JVM_PERFORMANCE_OPTS, KafkaJavaBroker
from tests.harness.zookeeper import ZooKeeperServer

TOPIC = "request-cost"
PARTITIONS = 8


def produce_frame(partitions: int) -> Callable[[int], bytes]:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), None, b"x" * 100)
    batch = bytes(builder.build())

    def frame(correlation_id: int) -> bytes:
        body = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
            name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=p, records=batch)
                                        for p in range(partitions)])] if partitions else [])
        return encode_request(body, 0, 9, correlation_id, "request-cost")
    return frame


def api_versions_frame(correlation_id: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="request-cost", client_software_version="1")
    return encode_request(body, 18, 3, correlation_id, "request-cost")


KINDS: list[tuple[str, Callable[[int], bytes]]] = [
    ("Produce, no partitions", produce_frame(0)),
    ("Produce, 1 record to 1 partition", produce_frame(1)),
    (f"Produce, 1 record to each of {PARTITIONS} partitions", produce_frame(PARTITIONS)),
    ("ApiVersions v3", api_versions_frame),
]


def drive(port: int, make_frame: Callable[[int], bytes], requests: int, in_flight: int) -> float:
    """Seconds for ``requests`` requests with ``in_flight`` outstanding on one connection."""
    frames = [make_frame(i) for i in range(1000)]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = answered = 0
        pending = bytearray()
        start = time.perf_counter()
        while answered < requests:
            while sent < requests and sent - answered < in_flight:
                sock.sendall(frames[sent % 1000])
                sent += 1
            data = sock.recv(1 << 20)
            if not data:
                raise RuntimeError("the broker closed the connection")
            pending += data
            position = 0
            while len(pending) - position >= 4:
                size = struct.unpack_from(">i", pending, position)[0]
                if len(pending) - position < 4 + size:
                    break
                position += 4 + size
                answered += 1
            del pending[:position]
        return time.perf_counter() - start


def measure(brokers: dict[str, BrokerProcess], args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """(requests/s, µs CPU each) of each kind on each broker: medians of ``--rounds`` rounds, the
    brokers taking turns within each round so that a change in the machine's load hits them alike."""
    ports = {label: int(broker.bootstrap.rsplit(":", 1)[1]) for label, broker in brokers.items()}
    for broker in brokers.values():
        broker.create_topic(TOPIC, PARTITIONS)
        broker.wait_for_leaders(TOPIC, PARTITIONS)
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in brokers}
    for name, make_frame in KINDS:
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label in brokers}
        for label in brokers:  # warm-up (the JVM's JIT too)
            drive(ports[label], make_frame, min(args.requests, 5_000), args.in_flight)
        for round_ in range(args.rounds):
            for label, broker in brokers.items():
                spy = None
                if args.profile is not None and label == "ours" and round_ == 0 and "1 record to 1" in name:
                    assert broker.process is not None
                    spy = subprocess.Popen([str(PY_SPY), "record", "--idle", "-r", "100", "-f", "speedscope", "-o",
                                            str(args.profile), "-p", str(broker.process.pid)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1)
                cpu = broker_cpu_seconds(broker)
                seconds = drive(ports[label], make_frame, args.requests, args.in_flight)
                cpu = broker_cpu_seconds(broker) - cpu
                if spy is not None:
                    spy.send_signal(2)  # SIGINT: py-spy writes its file
                    spy.wait(60)
                samples[label].append((args.requests / seconds, cpu / args.requests * 1e6))
                print(f"  {label}: {name}: {samples[label][-1][0]:,.0f} requests/s, "
                      f"{samples[label][-1][1]:.1f} µs CPU each", flush=True)
        for label, rows in samples.items():
            results[label].append((statistics.median(r for r, _ in rows), statistics.median(c for _, c in rows)))
    return results


IN_PROCESS_ROUNDS = 7


def measure_in_process(zk_connect: str, tmp: Path, requests: int) -> list[tuple[float, float]]:
    """(requests/s, µs CPU each) of each kind through our KafkaApis in this process, best round."""
    import uvloop

    from broker.config import KafkaConfig
    from broker.kafka_apis import KafkaApis
    from broker.kafka_server import KafkaServer
    from broker.network.request_channel import Request
    from protocol.headers import parse_request_header

    broker = BrokerProcess(zk_connect, 0, tmp)  # its properties and topic creation; not started

    async def run() -> list[tuple[float, float]]:
        server = KafkaServer(KafkaConfig.from_properties(broker.properties()))
        await server.startup()
        try:
            await asyncio.get_running_loop().run_in_executor(None, broker.create_topic, TOPIC, PARTITIONS)
            apis, processor = KafkaApis(server), server.socket_server.processors[0]
            rows = []
            for _, make_frame in KINDS:
                frames = [bytes(make_frame(i))[4:] for i in range(1000)]  # without the size prefix
                per_round = max(1, requests // IN_PROCESS_ROUNDS)
                best = (0.0, float("inf"))
                for round_ in range(IN_PROCESS_ROUNDS + 1):  # the first is a warm-up
                    wall, cpu = time.perf_counter(), time.process_time()
                    for i in range(per_round):
                        frame = bytearray(frames[i % 1000])
                        await apis(Request(processor, "in-process", parse_request_header(frame), frame,
                                           "PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 0)))
                        await asyncio.sleep(0)  # the callbacks it scheduled (purgatory checks, ...)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    if round_ and cpu / per_round * 1e6 < best[1]:
                        best = (per_round / wall, cpu / per_round * 1e6)
                rows.append(best)
                print(f"  in-process: {KINDS[len(rows) - 1][0]}: {best[1]:.1f} µs CPU each", flush=True)
            return rows
        finally:
            await server.shutdown()
    return uvloop.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--kafka", action="store_true", help="also Apache Kafka 3.9")
    parser.add_argument("--profile", type=Path, help="py-spy speedscope file for our one-record row")
    parser.add_argument("--baseline", type=Path,
                        help="also our broker from another checkout (e.g. `git worktree add /tmp/base HEAD~1`), "
                             "for before/after figures measured side by side")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per row; the table shows medians")
    parser.add_argument("--in-process", action="store_true",
                        help="our handler path alone: KafkaApis in this process, no sockets")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print("command: python bench/request_cost_bench.py " + " ".join(sys.argv[1:]), flush=True)
    kinds: list[tuple[str, Callable[..., BrokerProcess]]] = [("ours", BrokerProcess)]
    if args.baseline is not None:
        kinds.append((f"baseline {args.baseline}", type("BaselineBroker", (BrokerProcess,), {
            "repo_root": args.baseline.resolve(), "DIR_PREFIX": "baseline"})))
    if args.kafka:  # as bench/vs_kafka.py runs it: -Xmx1g, Kafka's own JVM flags
        kinds.append(("Kafka 3.9", functools.partial(KafkaJavaBroker, heap=KAFKA_HEAP,
                                                     jvm_performance_opts=KAFKA_JVM_PERFORMANCE_OPTS)))
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        brokers: dict[str, BrokerProcess] = {}
        try:
            if args.in_process:
                results["ours, in process"] = measure_in_process(f"{zk.connect_string}/ours", Path(tmp) / "ours",
                                                                 args.requests)
            else:
                for index, (label, cls) in enumerate(kinds):  # each in a ZooKeeper chroot of its own
                    brokers[label] = cls(f"{zk.connect_string}/kind{index}", 0, Path(tmp) / f"kind{index}")
                    brokers[label].start()
                results = measure(brokers, args)
        finally:
            for broker in brokers.values():
                broker.stop()
            zk.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    setting = ("KafkaApis called directly, best of seven rounds" if args.in_process
               else f"one connection, {args.in_flight} requests in flight, medians of {args.rounds} rounds")
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average at end {load}; {setting}\n")
    labels = list(results)
    print("| request | " + " | ".join(f"{label}: requests/s | {label}: µs CPU each" for label in labels) + " |")
    print("| --- |" + " --- | --- |" * len(labels))
    for i, (name, _) in enumerate(KINDS):
        print(f"| {name} | " + " | ".join(f"{results[label][i][0]:,.0f} | {results[label][i][1]:.1f}"
                                         for label in labels) + " |")
    if args.json:
        keys = {label: "kafka" if label == "Kafka 3.9" else label.split()[0].rstrip(",") for label in labels}
        rows = [{"section": section, "name": name, "unit": unit, "higher_is_better": column == 0,
                 "value": {keys[label]: results[label][i][column] for label in labels}}
                for column, (section, unit) in enumerate((("requests a second", "requests/s"),
                                                          ("broker CPU per request", "µs CPU")))
                for i, (name, _) in enumerate(KINDS)]
        bench_json.write(args.json, "request_cost_bench", "", rows, setting=setting,
                         kinds={keys[label]: label for label in labels})


if __name__ == "__main__":
    main()
