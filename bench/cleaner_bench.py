"""Log cleaner throughput next to Kafka 3.9's on the same data, and produce throughput while cleaning.

1. Writes a compacted log of ``--size-mb`` MiB (``--value-bytes`` values, ``--distinct-keys``
   fraction of distinct keys, ~16 KiB batches, ``--codec``) into a log dir with the storage code.
2. Our cleaner: one Cleaner (one thread's dedupe buffer, Kafka's defaults) cleans a copy of it;
   MB/s = bytes of log processed / seconds, as Kafka's cleaner reports it.
3. Kafka's cleaner: a real Kafka 3.9 broker (``../shared/kafka-cli``, ZooKeeper mode, one cleaner
   thread, defaults otherwise) starts on another copy; its log-cleaner.log line "X MB of log
   processed in Y seconds (Z MB/sec)" for the first cleaning gives its figures.
4. Produce throughput and the broker's CPU (librdkafka, acks=1, ``--messages`` values of
   ``--value-bytes``, 1% distinct keys) into a new compacted topic per round, on two of our
   brokers taking turns: one whose cleaner compacts the topic meanwhile, one with
   ``log.cleaner.enable=false``; what the cleaner costs the producer.

    python bench/cleaner_bench.py [--size-mb 128] [--skip-kafka] [--skip-produce] [--messages N] [--rounds N]
        [--json FILE]    # the rows as JSON, for scripts/gen_docs.py and bench/charts.py
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_json  # noqa: E402
from bench.broker_bench import broker_cpu_seconds  # noqa: E402
from protocol.records.builder import RecordBatchBuilder  # noqa: E402
from storage.cleaner.cleaner import Cleaner  # noqa: E402
from storage.cleaner.cleaner_config import CleanerConfig  # noqa: E402
from storage.cleaner.log_cleaner_manager import LogCleanerManager  # noqa: E402
from storage.cleaner.offset_map import OffsetMap  # noqa: E402
from storage.cleaner.throttler import Throttler  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402
from storage.log_manager import LogManager  # noqa: E402
from storage.log_segment import now_ms  # noqa: E402

TOPIC = "bench"
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(128 << 20), "min.cleanable.dirty.ratio": "0.01"}
MB = 1 << 20


def write_log(log_dir: Path, size_mb: int, value_bytes: int, distinct: float, codec: int) -> tuple[int, int]:
    """The compacted log Kafka and we clean; returns (records, distinct keys)."""
    manager = LogManager([str(log_dir)], LogConfig(), topic_configs={TOPIC: TOPIC_CONFIG})
    manager.startup()
    log = manager.get_or_create_log(TOPIC, 0)
    rng = random.Random(42)
    per_batch = max(1, 16384 // (value_bytes + 30))
    keys = max(1, int(size_mb * MB / (value_bytes + 30) * distinct))
    value = bytes(rng.randrange(256) for _ in range(value_bytes))
    records = 0
    while log.size < size_mb * MB:
        builder = RecordBatchBuilder(compression=codec)
        timestamp = now_ms()
        for _ in range(per_batch):
            builder.append(timestamp, b"key-%09d" % rng.randrange(keys), value)
        log.append_as_leader(builder.build(), leader_epoch=0)
        records += per_batch
    log.roll()  # every record outside the active segment: all of it is cleanable
    log.update_high_watermark(log.log_end_offset)
    manager.shutdown()
    return records, keys


def clean_with_ours(log_dir: Path) -> tuple[float, float, float]:
    """(MB processed, seconds, MB/s) of one cleaning by one cleaner thread with Kafka's default buffers."""
    config = CleanerConfig()
    manager = LogManager([str(log_dir)], LogConfig(), topic_configs={TOPIC: TOPIC_CONFIG})
    manager.startup()
    try:
        cleaners = LogCleanerManager([str(log_dir)], manager.all_logs)
        cleaner = Cleaner(0, OffsetMap(config.offset_map_memory), config.io_buffer_per_thread,
                          config.max_message_size, config.dedupe_buffer_load_factor, Throttler(1e300),
                          cleaners.check_cleaning_aborted)
        cleanable = cleaners.grab_filthiest_compacted_log(now_ms())
        assert cleanable is not None, "nothing to clean"
        _, stats = cleaner.clean(cleanable)
        cleaners.done_cleaning((TOPIC, 0), str(log_dir), cleanable.first_dirty_offset)
    finally:
        manager.shutdown()
    return stats.bytes_read / MB, stats.elapsed_secs, stats.bytes_read / MB / stats.elapsed_secs


def clean_with_kafka(log_dir: Path, work: Path) -> tuple[float, float, float]:
    """The same cleaning by a real Kafka 3.9 broker started on ``log_dir``: its own figures."""
    from coordination.kafka_zk_client import KafkaZkClient
    from coordination.model import ReplicaAssignment, TopicAssignment, random_uuid_b64
    from tests.harness.kafka_broker import KafkaJavaBroker
    from tests.harness.zookeeper import ZooKeeperServer

    (log_dir / "meta.properties").unlink(missing_ok=True)  # Kafka writes its own with its cluster id
    with ZooKeeperServer(base_dir=work / "zookeeper") as zookeeper:
        connect = zookeeper.connect_string_with_chroot("kafka-cleaner-bench")
        zk = KafkaZkClient.connect(connect, 10000)
        try:
            zk.create_top_level_paths()  # the topic as kafka-topics.sh --zookeeper wrote it, broker 0 not up yet
            zk.set_or_create_entity_config("topics", TOPIC, TOPIC_CONFIG)
            zk.create_topic_assignment(TOPIC, TopicAssignment(random_uuid_b64(), {0: ReplicaAssignment((0,))}))
        finally:
            zk.close()
        kafka = KafkaJavaBroker(connect, 0, work, {"log.cleaner.backoff.ms": "100"}, log_dir=log_dir)
        kafka.start(timeout=180)
        try:
            pattern = re.compile(r"Log cleaner thread 0 cleaned log bench-0 .*?\n\s*([\d,.]+) MB of log processed in "
                                 r"([\d,.]+) seconds \(([\d,.]+) MB/sec\)")
            deadline = time.monotonic() + 3600
            while not (found := pattern.search(kafka.cleaner_log())):
                if time.monotonic() > deadline:
                    raise RuntimeError("Kafka's cleaner did not clean within an hour")
                time.sleep(1)
        finally:
            kafka.stop(timeout=120)
    return tuple(float(g.replace(",", "")) for g in found.groups())  # type: ignore[return-value]


def _produce(bootstrap: str, topic: str, messages: int, value_bytes: int) -> float:
    """messages/s of ``messages`` keyed values (1% distinct keys), acks=1."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.messages": 1_000_000})
    keys = max(1, messages // 100)
    value = b"v" * value_bytes
    start = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, key=b"key-%09d" % (i % keys), value=value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise RuntimeError("undelivered messages")
    return messages / (time.perf_counter() - start)


def _wait_idle(broker: object, seconds: float = 0.5, timeout: float = 120.0) -> None:
    """Until the broker (and its cleaner processes) used under 5% of a core for ``seconds``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = broker_cpu_seconds(broker)  # type: ignore[arg-type]
        time.sleep(seconds)
        if broker_cpu_seconds(broker) - before < 0.05 * seconds:  # type: ignore[arg-type]
            return


def produce_while_cleaning(messages: int, value_bytes: int, work: Path, rounds: int) -> dict[str, list[float]]:
    """messages/s and broker CPU seconds (its cleaner processes included) into a new compacted topic
    per round, on a broker whose cleaner compacts it meanwhile and on one with the cleaner off,
    taking turns; each run waits for the other broker to be idle first."""
    from tests.harness.broker import BrokerProcess
    from tests.harness.zookeeper import ZooKeeperServer

    results: dict[str, list[float]] = {}
    with ZooKeeperServer(base_dir=work / "zookeeper-produce") as zookeeper:
        brokers = {
            "cleaner on": BrokerProcess(zookeeper.connect_string_with_chroot("on"), 0, work / "on",
                                        {"log.cleaner.backoff.ms": "100"}),
            "cleaner off": BrokerProcess(zookeeper.connect_string_with_chroot("off"), 0, work / "off",
                                         {"log.cleaner.enable": "false"}),
        }
        try:
            for broker in brokers.values():
                broker.start()
            for round_ in range(rounds):
                for name, broker in brokers.items():
                    topic = f"compacted-{round_}"
                    broker.create_topic(topic, configs={**TOPIC_CONFIG, "segment.bytes": str(4 * MB)})
                    for other in brokers.values():
                        _wait_idle(other)
                    cpu = broker_cpu_seconds(broker)
                    results.setdefault(f"{name}: msg/s", []).append(_produce(broker.bootstrap, topic, messages,
                                                                             value_bytes))
                    results.setdefault(f"{name}: CPU s", []).append(broker_cpu_seconds(broker) - cpu)
            log_text = brokers["cleaner on"].log_path.read_text()
            results["cleanings"] = [float(log_text.count("Log cleaner thread 0 cleaned log compacted-"))]
        finally:
            for broker in brokers.values():
                broker.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=128)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--distinct-keys", type=float, default=0.01, help="fraction of distinct keys")
    parser.add_argument("--codec", type=int, default=0, help="0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd")
    parser.add_argument("--messages", type=int, default=2_000_000, help="for the produce-while-cleaning part")
    parser.add_argument("--rounds", type=int, default=3, help="of the produce-while-cleaning part")
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--skip-produce", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    command = "python bench/cleaner_bench.py " + " ".join(sys.argv[1:])
    rows: list[dict[str, object]] = []
    cleaning = f"cleaning a {args.size_mb:,} MiB compacted log, one cleaner thread"
    with tempfile.TemporaryDirectory(prefix="cleaner-bench-") as tmp:
        work = Path(tmp)
        source = work / "source"
        started = time.monotonic()
        records, keys = write_log(source, args.size_mb, args.value_bytes, args.distinct_keys, args.codec)
        print(f"wrote {args.size_mb} MiB: {records:,} records, {keys:,} distinct keys "
              f"({time.monotonic() - started:.0f} s)", flush=True)
        ours = work / "ours"
        shutil.copytree(source, ours)
        mb, secs, rate = clean_with_ours(ours)
        print(f"ours:  {mb:,.1f} MB of log processed in {secs:,.1f} seconds ({rate:,.1f} MB/sec)", flush=True)
        rows += _row(cleaning, "log processed", "MB/s", True, ours=rate)
        if not args.skip_kafka:
            theirs = work / "kafka"
            shutil.move(str(source), theirs)
            mb, secs, rate = clean_with_kafka(theirs, work)
            print(f"Kafka: {mb:,.1f} MB of log processed in {secs:,.1f} seconds ({rate:,.1f} MB/sec)", flush=True)
            rows[-1]["value"]["kafka"] = rate  # type: ignore[index]
        if not args.skip_produce:
            produced = produce_while_cleaning(args.messages, args.value_bytes, work, args.rounds)
            print(f"produce {args.messages:,} x {args.value_bytes} B with 1% distinct keys, acks=1, into a new "
                  f"compacted topic, medians of {args.rounds} rounds "
                  f"({int(produced.pop('cleanings')[0])} cleanings meanwhile on the broker whose cleaner runs):")
            section = (f"produce {args.value_bytes} B values into a compacted topic, medians of {args.rounds} rounds "
                       "(ours)")
            for name, values in produced.items():
                print(f"  {name}: {statistics.median(values):,.2f}  (" + ", ".join(f"{v:,.2f}" for v in values) + ")")
                what, unit = name.split(": ")
                rows += _row(section, what, "msg/s" if unit == "msg/s" else "broker CPU s", unit == "msg/s",
                             ours=statistics.median(values))
    print(f"command: {command}")
    if args.json:
        bench_json.write(args.json, "cleaner_bench", "", rows, kinds={"ours": "ours", "kafka": "Kafka 3.9"})


def _row(section: str, name: str, unit: str, higher_is_better: bool, **value: float) -> list[dict[str, object]]:
    return [{"section": section, "name": name, "unit": unit, "higher_is_better": higher_is_better, "value": value}]


if __name__ == "__main__":
    main()
