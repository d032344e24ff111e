"""Transactional producer throughput and commit latency on one broker, next to the idempotent producer.

Starts its own ZooKeeper (Debian's package) and one broker process on free ports in a temp dir,
then measures with confluent-kafka (librdkafka), 100-byte values to one partition:
- throughput of the idempotent producer (acks=all), and of a transactional producer committing
  every 100 and every 1,000 records (begin, produce, commit; ``commit_transaction`` waits for the
  records and for EndTxn), each run ``--repeats`` times, interleaved, median reported;
- commit latency p50/p99: ``commit_transaction`` of transactions of 100 records whose records are
  already acknowledged (``flush`` first), i.e. the EndTxn round trip (PrepareCommit written to
  ``__transaction_state``; the markers follow in the background);
- completion p50/p99, with raw requests on one connection: from the EndTxn answer until an
  AddPartitionsToTxn for the next transaction is accepted (sent again at once after each
  CONCURRENT_TRANSACTIONS), i.e. until the markers are written and CompleteCommit is in the log.
  librdkafka sends that AddPartitionsToTxn right after the commit and, refused, waits 20 ms.

``--kafka`` runs the same against Apache Kafka 3.9's broker from ``../shared/kafka-cli``.

    python bench/txn_bench.py [--messages N] [--repeats R] [--latency-transactions T] [--kafka]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from broker_bench import create_topic, warm_up
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_json  # noqa: E402
from tests.harness.broker import BrokerProcess  # noqa: E402
from tests.harness.kafka_broker import KafkaJavaBroker  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402
from tests.integration.transactions.txn_helpers import begin, produce_transactional, wait_for_coordinator  # noqa: E402

PAYLOAD = b"x" * 100
PRODUCER_CONFIG = {"linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}


def _send(producer: Producer, topic: str, count: int) -> None:
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, PAYLOAD, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)


def idempotent(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to produce ``count`` values with an idempotent acks=all producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER_CONFIG})
    warm_up(producer, topic)
    start = time.perf_counter()
    _send(producer, topic, count)
    if producer.flush(120):
        raise RuntimeError("records not delivered within 120 s")
    return time.perf_counter() - start


def transactional(bootstrap: str, topic: str, count: int, per_transaction: int) -> float:
    """Seconds to produce ``count`` values in transactions of ``per_transaction`` records."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                         **PRODUCER_CONFIG})
    producer.init_transactions(30)
    producer.begin_transaction()
    warm_up(producer, topic)  # the partition joins a transaction once, outside the measurement
    producer.commit_transaction(30)
    start = time.perf_counter()
    for _ in range(count // per_transaction):
        producer.begin_transaction()
        _send(producer, topic, per_transaction)
        producer.commit_transaction(60)
    return time.perf_counter() - start


def commit_latency(bootstrap: str, topic: str, transactions: int) -> tuple[float, float]:
    """p50/p99 ms of ``commit_transaction`` for transactions of 100 records already acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 0})
    producer.init_transactions(30)
    samples = []
    for _ in range(transactions + 1):
        producer.begin_transaction()
        _send(producer, topic, 100)
        if producer.flush(30):
            raise RuntimeError("records not delivered within 30 s")
        start = time.perf_counter()
        producer.commit_transaction(30)
        samples.append(time.perf_counter() - start)
    q = statistics.quantiles(samples[1:], n=100)  # the first pays for connections to the coordinator
    return q[49] * 1000, q[98] * 1000


def completion_latency(broker: BrokerProcess, topic: str, transactions: int) -> tuple[float, float]:
    """p50/p99 ms from the EndTxn answer until the next transaction's AddPartitionsToTxn is accepted."""
    from protocol.api_keys import ApiKey
    from protocol.errors import Errors
    from protocol.messages import AddPartitionsToTxnRequest as Add
    from protocol.messages import EndTxnRequest

    txn = f"bench-{uuid.uuid4().hex[:8]}"
    wait_for_coordinator(broker, txn)
    producer_id, epoch = begin(broker, txn)
    add = Add(v3_and_below_transactional_id=txn, v3_and_below_producer_id=producer_id,
              v3_and_below_producer_epoch=epoch, v3_and_below_topics=[Add.AddPartitionsToTxnTopic(name=topic,
                                                                                                   partitions=[0])])
    end = EndTxnRequest(transactional_id=txn, producer_id=producer_id, producer_epoch=epoch, committed=True)
    samples = []
    with broker.connect("txn-bench") as connection:
        ended = None
        for n in range(transactions + 1):
            while (error := connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add).results_by_topic_v3_and_below[0]
                   .results_by_partition[0].partition_error_code) == Errors.CONCURRENT_TRANSACTIONS:
                pass
            if error:
                raise RuntimeError(f"AddPartitionsToTxn: {Errors(error).name}")
            if ended is not None:
                samples.append(time.perf_counter() - ended)
            if produce_transactional(broker, txn, producer_id, epoch, topic, 0, [PAYLOAD] * 10, n * 10):
                raise RuntimeError("transactional produce failed")
            if connection.request(ApiKey.END_TXN, 3, end).error_code:
                raise RuntimeError("EndTxn failed")
            ended = time.perf_counter()
    q = statistics.quantiles(samples, n=100)
    return q[49] * 1000, q[98] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500_000, help="records per throughput run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind (median reported)")
    parser.add_argument("--latency-transactions", type=int, default=500, help="commits sampled for latency")
    parser.add_argument("--kafka", action="store_true", help="measure Apache Kafka 3.9's broker instead")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print("command: python bench/txn_bench.py " + " ".join(sys.argv[1:]))
    runs: dict[str, tuple[int, Callable[[str, str], float]]] = {
        "idempotent, acks=all": (0, lambda b, t: idempotent(b, t, args.messages)),
        "transactional, 100 records/transaction": (100, lambda b, t: transactional(b, t, args.messages, 100)),
        "transactional, 1,000 records/transaction": (1000, lambda b, t: transactional(b, t, args.messages, 1000)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        kind = KafkaJavaBroker if args.kafka else BrokerProcess
        broker = kind(zk.connect_string, 0, tmp, {"transaction.state.log.num.partitions": "1"})
        try:
            broker.start()
            seconds: dict[str, list[float]] = {name: [] for name in runs}
            for repeat in range(args.repeats):
                for name, (_size, run) in runs.items():
                    topic = f"bench-{repeat}-{len(seconds[name])}-{uuid.uuid4().hex[:6]}"
                    create_topic(broker.bootstrap, topic, 1)
                    seconds[name].append(run(broker.bootstrap, topic))
            baseline = args.messages / statistics.median(seconds["idempotent, acks=all"])
            print(f"{'producer (100 B records, 1 partition)':<44}{'records/s':>12}{'MB/s':>8}{'of idempotent':>15}")
            rows: list[dict[str, object]] = []
            for name, times in seconds.items():
                rate = args.messages / statistics.median(times)
                print(f"{name:<44}{rate:>12,.0f}{rate * 100 / 1e6:>8.1f}{rate / baseline:>14.1%}")
                rows.append({"name": name, "unit": "records/s", "value": rate, "of_idempotent": rate / baseline})
            create_topic(broker.bootstrap, "bench-latency", 1)
            p50, p99 = commit_latency(broker.bootstrap, "bench-latency", args.latency_transactions)
            print(f"commit latency (EndTxn, 100 acknowledged records): p50 {p50:.2f} ms, p99 {p99:.2f} ms")
            rows.append({"name": "commit latency (EndTxn, 100 acknowledged records)", "unit": "ms p50/p99",
                         "value": [p50, p99]})
            create_topic(broker.bootstrap, "bench-completion", 1)
            p50, p99 = completion_latency(broker, "bench-completion", args.latency_transactions)
            print(f"completion (EndTxn answered -> next AddPartitionsToTxn accepted): p50 {p50:.2f} ms, "
                  f"p99 {p99:.2f} ms")
            rows.append({"name": "completion (EndTxn answered to next AddPartitionsToTxn accepted)",
                         "unit": "ms p50/p99", "value": [p50, p99]})
            if args.json:
                bench_json.write(args.json, "txn_bench (Kafka 3.9)" if args.kafka else "txn_bench", "", rows)
        finally:
            broker.stop()
            zk.close()


if __name__ == "__main__":
    main()
