"""Produce throughput with the Prometheus endpoint on next to off, and what a scrape costs.

Starts its own ZooKeeper and two brokers on free ports in a temp dir (separate chroots): one with
``metrics.prometheus.listener`` set (request metrics kept, /metrics scraped every
``--scrape-interval`` seconds throughout, 15 times Prometheus' default rate at 1 s), one without.
Both count Kafka's per-topic counters, which the broker always keeps. In interleaved rounds,
librdkafka (acks=1) produces the same values to each: 100 B to 8 partitions (many small requests)
and 1 KiB to 1 partition. Reports the best messages/s of each and the broker process's median CPU
seconds per GB produced (less skewed than throughput by other load on a shared machine), then
the scrapes' median time and the size of /metrics.

    python bench/metrics_bench.py [--messages N] [--rounds N] [--scrape-interval S]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import broker_cpu_seconds, create_topic, produce  # noqa: E402
from bench import bench_json  # noqa: E402

from tests.harness.broker import BrokerProcess  # noqa: E402
from tests.harness.ports import free_port  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

CASES = ((100, 8), (1024, 1))  # value size, partitions


class Scraper(threading.Thread):
    """GET /metrics every ``interval`` seconds until stopped; keeps each scrape's duration and size."""

    def __init__(self, port: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.durations: list[float] = []
        self.sizes: list[int] = []
        self.lines = 0
        self._done = threading.Event()

    def run(self) -> None:
        while True:
            start = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=30) as answer:
                body = answer.read()
            self.durations.append(time.perf_counter() - start)
            self.sizes.append(len(body))
            self.lines = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
            if self._done.wait(self.interval):
                return

    def stop(self) -> None:
        self._done.set()
        self.join(60)


def request_metrics_cost(count: int = 20_000) -> float:
    """µs of CPU the request metrics add to one Produce request of 8 partitions (counted, its error
    codes walked, its times computed and kept), measured in this process."""
    from broker.metrics.request_metrics import RequestMetrics
    from broker.network.request_channel import Request, Response, ResponseAction
    from protocol.api_keys import ApiKey
    from protocol.framing import encode_request
    from protocol.headers import parse_request_header
    from protocol.messages import ProduceRequest, ProduceResponse

    frame = encode_request(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[]), ApiKey.PRODUCE, 9, 1, "bench")[4:]
    P = ProduceResponse
    body = P(responses=[P.TopicProduceResponse(name="t", partition_responses=[
        P.PartitionProduceResponse(index=i, error_code=0) for i in range(8)])])
    metrics = RequestMetrics()
    requests = [Request(None, "c", parse_request_header(frame), bytearray(frame), "PLAINTEXT", "PLAINTEXT",  # type: ignore[arg-type]
                        ("127.0.0.1", 1)) for _ in range(count)]
    responses = [Response(request, ResponseAction.SEND, [], body, 9) for request in requests]
    start = time.thread_time()
    for request, response in zip(requests, responses):
        request.dequeue_time_ns = request.api_local_complete_ns = request.response_complete_ns = time.monotonic_ns()
        metrics.on_response(response)
        now = time.monotonic_ns()
        metrics.on_complete(request, now, now)
    return (time.thread_time() - start) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per produce run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the best is reported)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes of the 'on' broker")
    args = parser.parse_args()
    print("command: python bench/metrics_bench.py " + " ".join(sys.argv[1:]))
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        metrics_port = free_port()
        brokers = {
            "off": BrokerProcess(zk.connect_string_with_chroot("off"), 0, Path(tmp) / "off"),
            "on": BrokerProcess(zk.connect_string_with_chroot("on"), 0, Path(tmp) / "on",
                                {"metrics.prometheus.listener": f"http://127.0.0.1:{metrics_port}"}),
        }
        scraper = Scraper(metrics_port, args.scrape_interval)
        try:
            for broker in brokers.values():
                broker.start()
            scraper.start()
            best: dict[tuple[str, int, int], float] = {}
            cpu_per_gb: dict[tuple[str, int, int], list[float]] = {}
            for round_ in range(args.rounds):  # interleaved, so that load from elsewhere hits both alike
                for size, partitions in CASES:
                    order = list(brokers.items()) if round_ % 2 == 0 else list(brokers.items())[::-1]
                    for state, broker in order:
                        topic = f"bench-{size}-{partitions}-{round_}"
                        create_topic(broker.bootstrap, topic, partitions)
                        cpu = broker_cpu_seconds(broker)
                        seconds = produce(broker.bootstrap, topic, args.messages, size, warm=True)
                        cpu = broker_cpu_seconds(broker) - cpu
                        key = (state, size, partitions)
                        best[key] = max(best.get(key, 0.0), args.messages / seconds)
                        cpu_per_gb.setdefault(key, []).append(cpu / (args.messages * size / 1e9))
            scraper.stop()
            print(f"{'produce (best of ' + str(args.rounds) + ')':<28}{'metrics':>8}{'messages/s':>12}{'MB/s':>8}"
                  f"{'of off':>8}{'broker CPU s/GB':>17}")
            for size, partitions in CASES:
                for state in brokers:
                    rate = best[(state, size, partitions)]
                    print(f"{f'{size} B, {partitions} partition(s)':<28}{state:>8}{rate:>12,.0f}"
                          f"{rate * size / 1e6:>8.1f}{rate / best[('off', size, partitions)]:>8.0%}"
                          f"{statistics.median(cpu_per_gb[(state, size, partitions)]):>17.2f}")
            cost = request_metrics_cost()
            print(f"\nrequest metrics: {cost:.1f} µs of CPU per Produce request of 8 partitions")
            if args.json:
                rows = [{"section": "produce", "name": f"produce {size} B, {partitions} partition(s)",
                         "unit": "messages/s", "higher_is_better": True,
                         "value": {state: best[(state, size, partitions)] for state in brokers}}
                        for size, partitions in CASES]
                rows += [{"section": "broker CPU", "name": f"produce {size} B, {partitions} partition(s)",
                          "unit": "CPU s per GB", "higher_is_better": False,
                          "value": {state: statistics.median(cpu_per_gb[(state, size, partitions)]) for state in brokers}}
                         for size, partitions in CASES]
                bench_json.write(args.json, "metrics_bench", "", rows, request_metrics_cpu_us=cost,
                                 kinds={state: f"metrics {state}" for state in brokers})
            print(f"/metrics scraped {len(scraper.durations)} times every {args.scrape_interval:g} s: median "
                  f"{statistics.median(scraper.durations) * 1000:.1f} ms, max {max(scraper.durations) * 1000:.1f} ms, "
                  f"{scraper.sizes[-1] / 1024:.0f} KiB, {scraper.lines} samples")
        finally:
            scraper.stop()
            for broker in brokers.values():
                broker.stop()
            zk.close()


if __name__ == "__main__":
    main()
