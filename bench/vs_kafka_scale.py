"""The ``--scale`` section of bench/vs_kafka.py: many partitions on one broker (one run per kind).

ZooKeeper kinds run two brokers: broker 0, started first, is the controller and holds no
partition; broker 1 leads all ``partitions`` partitions (one topic, RF=1, one record each, so
that every log has something to recover). Measured, in this order:
- creating the topic until every partition has taken a record (a leader in Metadata is not enough:
  librdkafka may ask broker 0, which learns the leaders before broker 1 has opened the logs);
- Metadata of all topics (librdkafka ``list_topics()``, 20 times) on broker 1;
- broker 1's RSS with the partitions, at rest;
- start-up: broker 1 stopped cleanly and started, until every partition has a leader again;
- recovery: broker 1 SIGKILLed; once ZooKeeper has expired its session it is started again, until
  every partition has a leader (its logs recovered);
- controller failover: broker 0 (the controller) SIGKILLed; from the moment ZooKeeper deletes
  /controller (its session expired) until the new controller has created a new topic and elected
  its leader (CreateTopics goes to the controller in ZooKeeper mode; the client retries until one
  answers).
Tansu keeps its data in memory and runs one node: only the first three apply to it.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.broker_bench import create_topic, percentiles_ms
from bench.vs_kafka_kinds import BrokerKind, rss_mb
from bench.vs_kafka_table import Results, Row
from tests.harness.broker import BrokerProcess

LEADERS_TIMEOUT = 900.0


def scale(kind: BrokerKind, partitions: int, results: Results) -> None:
    section = f"{partitions:,} partitions on one broker (one run)"
    rows = {
        "create": Row(section, "create the topic, until every partition has taken a record", "s", False),
        "metadata": Row(section, "Metadata of all topics (list_topics)", "ms p50/p99", False),
        "rss": Row(section, "RSS of the broker holding them, at rest", "MB", False),
        "start": Row(section, "start-up after a clean stop, until all have a leader", "s", False),
        "recovery": Row(section, "restart after SIGKILL (log recovery), until all have a leader", "s", False),
        "failover": Row(section, "controller failover: /controller deleted until a new topic has a leader", "s",
                        False),
    }
    name = kind.name
    kind.start(2)
    try:
        holder = kind.brokers[-1]
        holder_id = len(kind.brokers) - 1
        admin = AdminClient({"bootstrap.servers": holder.bootstrap})
        start = time.perf_counter()
        placement = {"replica_assignment": [[holder_id]] * partitions} if kind.zookeeper_mode \
            else {"replication_factor": 1}
        admin.create_topics([NewTopic("scale", partitions, **placement)], request_timeout=LEADERS_TIMEOUT)["scale"] \
            .result(LEADERS_TIMEOUT)
        wait_all_led(holder.bootstrap, "scale", partitions)
        write_one_each(holder.bootstrap, "scale", partitions)
        results.add(rows["create"], name, time.perf_counter() - start)
        samples = []
        for _ in range(20):
            start = time.perf_counter()
            admin.list_topics(timeout=60)
            samples.append(time.perf_counter() - start)
        results.add(rows["metadata"], name, percentiles_ms(samples, 50, 99))
        assert holder.process is not None
        results.add(rows["rss"], name, rss_mb(holder.process.pid))
        if not isinstance(holder, BrokerProcess):
            reason = "memory storage: nothing to load at start-up, nothing kept across a kill; one node, no controller"
            for key in ("start", "recovery", "failover"):
                results.not_available(rows[key], name, reason)
            return
        holder.stop()
        start = time.perf_counter()
        holder.start(LEADERS_TIMEOUT)
        wait_all_led(holder.bootstrap, "scale", partitions)
        results.add(rows["start"], name, time.perf_counter() - start)
        holder.kill()
        holder.wait_until_deregistered(60)
        start = time.perf_counter()
        holder.start(LEADERS_TIMEOUT)
        wait_all_led(holder.bootstrap, "scale", partitions)
        results.add(rows["recovery"], name, time.perf_counter() - start)
        results.add(rows["failover"], name, controller_failover(kind, holder))
    finally:
        kind.stop()


def wait_all_led(bootstrap: str, topic: str, partitions: int, timeout: float = LEADERS_TIMEOUT) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            parts = admin.list_topics(topic, timeout=30).topics[topic].partitions
        except KafkaException:  # while the broker starts: ask again
            parts = {}
        if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: not every partition has a leader after {timeout} s")


def write_one_each(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "queue.buffering.max.messages": max(100_000, partitions)})
    for partition in range(partitions):
        producer.produce(topic, b"x" * 100, partition=partition)
    if producer.flush(LEADERS_TIMEOUT):
        raise RuntimeError(f"records to {topic} not delivered within {LEADERS_TIMEOUT} s")


def controller_failover(kind: BrokerKind, survivor: BrokerProcess) -> float:
    """Seconds from /controller's deletion after SIGKILL of the controller (broker 0) until the
    survivor names itself controller in its Metadata and a topic created through it has a leader."""
    controller = kind.brokers[0]
    assert isinstance(controller, BrokerProcess)
    # Polled for the controller id: Metadata of all topics (thousands of partitions) every 10 ms
    # would load the survivor while it takes over, a topic of one partition does not.
    create_topic(survivor.bootstrap, "failover-probe", 1, replicas=[survivor.broker_id])
    zk = KazooClient(hosts=kind.zk_connect)
    zk.start(30)
    try:
        if not _names_broker_0(zk):
            raise RuntimeError(f"broker 0 is not the controller: {zk.get('/controller')[0]!r}")
        controller.kill()
        deadline = time.monotonic() + 60
        while _names_broker_0(zk):
            if time.monotonic() > deadline:
                raise RuntimeError("/controller still names broker 0 after 60 s")
            time.sleep(0.01)
        start = time.perf_counter()
        # librdkafka keeps sending CreateTopics to the controller it knows until its next periodic
        # metadata refresh (5 minutes): wait for the survivor to name itself, then create.
        wait_for_controller(survivor)
        admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
        admin.create_topics([NewTopic("after-failover", 1, replica_assignment=[[survivor.broker_id]])],
                            request_timeout=LEADERS_TIMEOUT)["after-failover"].result(LEADERS_TIMEOUT)
        wait_all_led(survivor.bootstrap, "after-failover", 1)
        return time.perf_counter() - start
    finally:
        zk.stop()
        zk.close()


def _names_broker_0(zk: KazooClient) -> bool:
    try:
        data, _ = zk.get("/controller")
    except NoNodeError:
        return False
    return b'"brokerid":0' in data.replace(b" ", b"")


def wait_for_controller(broker: BrokerProcess, timeout: float = LEADERS_TIMEOUT) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + timeout
    while admin.list_topics("failover-probe", timeout=30).controller_id != broker.broker_id:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{broker} does not name itself controller after {timeout} s")
        time.sleep(0.01)
