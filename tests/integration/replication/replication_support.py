"""What the replication tests share: waiting, topic layout, the ISR as brokers and ZooKeeper see
it, raw and librdkafka produce, reading a partition back, and a replica's segment files."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.api_keys import ApiKey
from protocol.messages import ProduceRequest
from protocol.records.builder import RecordBatchBuilder
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for

StartCluster = Callable[..., BrokerCluster]  # the start_cluster fixture: (n, overrides) -> started cluster


def live(cluster: BrokerCluster) -> list[BrokerProcess]:
    return [b for b in cluster.brokers if b.process is not None and not b.paused]


def controller_id(cluster: BrokerCluster) -> int:
    return live(cluster)[0].metadata().controller_id


def create_topic(cluster: BrokerCluster, topic: str, replicas: Sequence[int],
                 configs: dict[str, str] | None = None) -> None:
    """One partition on exactly ``replicas`` (the first is the preferred leader), written to
    ZooKeeper as kafka-topics --zookeeper did; returns once every live broker sees its leader."""
    from coordination.admin_zk_client import AdminZkClient, NewTopic
    from coordination.kafka_zk_client import KafkaZkClient

    zk = KafkaZkClient.connect(cluster.brokers[0].zk_connect, 10000)
    try:
        AdminZkClient(zk).create_topic(NewTopic(topic, assignment={0: list(replicas)}, configs=configs))
    finally:
        zk.close()
    for broker in live(cluster):
        broker.wait_for_leaders(topic, 1)


# --- partition state: every broker's Metadata and ZooKeeper --------------------------------------

@dataclass(frozen=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]  # sorted
    error_code: int = 0


def metadata_view(broker: BrokerProcess, topic: str, partition: int = 0) -> PartitionView | None:
    topics = broker.metadata([topic]).topics
    if not topics or topics[0].error_code:
        return None
    found = next((p for p in topics[0].partitions if p.partition_index == partition), None)
    if found is None:
        return None
    return PartitionView(found.leader_id, found.leader_epoch, tuple(found.replica_nodes),
                         tuple(sorted(found.isr_nodes)), found.error_code)


class ZkReader:
    """Reads the controller's znodes with kazoo (the connect string carries the test's chroot)."""

    def __init__(self, zk_connect: str) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=zk_connect, timeout=10.0)
        self.client.start(timeout=10.0)

    def partition_state(self, topic: str, partition: int = 0) -> dict[str, Any] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        return json.loads(data)

    def assignment(self, topic: str, partition: int = 0) -> list[int]:
        data, _ = self.client.get(f"/brokers/topics/{topic}")
        return json.loads(data)["partitions"][str(partition)]

    def close(self) -> None:
        self.client.stop()
        self.client.close()


@contextmanager
def zk_reader(zk_connect: str) -> Iterator[ZkReader]:
    reader = ZkReader(zk_connect)
    try:
        yield reader
    finally:
        reader.close()


def agreed_state(cluster: BrokerCluster, zk: ZkReader, topic: str, partition: int = 0,
                 brokers: Iterable[BrokerProcess] | None = None) -> PartitionView | None:
    """The partition's state if ZooKeeper and every (live) broker's Metadata show the same leader,
    leader epoch and ISR; None while they differ."""
    state = zk.partition_state(topic, partition)
    if state is None:
        return None
    views = {metadata_view(b, topic, partition) for b in (live(cluster) if brokers is None else brokers)}
    if len(views) != 1:
        return None
    (view,) = views
    if view is None or (view.leader, view.leader_epoch, view.isr) != \
            (state["leader"], state["leader_epoch"], tuple(sorted(state["isr"]))):
        return None
    return view


def wait_for_isr(cluster: BrokerCluster, zk: ZkReader, topic: str, isr: Iterable[int], partition: int = 0,
                 timeout: float = 30.0) -> PartitionView:
    expected = tuple(sorted(isr))
    return wait_for(lambda: (v := agreed_state(cluster, zk, topic, partition)) is not None and v.isr == expected
                    and v, f"ISR {list(expected)} of {topic}-{partition} in ZooKeeper and every broker's metadata",
                    timeout)


# --- producing ------------------------------------------------------------------------------------

def produce_raw(broker: BrokerProcess, topic: str, values: Sequence[bytes], acks: int,
                partition: int = 0, timeout_ms: int = 10000) -> Any:
    """One ProduceRequest with one batch holding ``values``; the partition's response."""
    builder = RecordBatchBuilder(magic=2)
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    request = ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition,
                                                                        records=builder.build())])])
    response = broker.request(ApiKey.PRODUCE, 9, request, timeout=timeout_ms / 1000 + 5)
    return response.responses[0].partition_responses[0]


class Deliveries:
    """A librdkafka producer (no retries unless asked) and what it was told about each message."""

    def __init__(self, bootstrap: str, acks: str, **config: Any) -> None:
        import confluent_kafka

        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "retries": 0,
            "message.timeout.ms": 20000, "topic.metadata.refresh.interval.ms": 1000, **config})
        self.acked: list[bytes] = []
        self.errors: dict[bytes, Any] = {}

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors[msg.value()] = err

    def send(self, topic: str, values: Iterable[bytes], partition: int = 0) -> None:
        """Send and wait for every delivery report."""
        for value in values:
            self.producer.produce(topic, value, partition=partition, on_delivery=self._on_delivery)
            self.producer.poll(0)
        assert self.producer.flush(60) == 0, "deliveries still pending after 60s"


# --- reading back ---------------------------------------------------------------------------------

def read_partition(bootstrap: str, topic: str, partition: int = 0, timeout: float = 60.0) -> list[bytes]:
    """Every committed message of the partition, in offset order, through librdkafka."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-tests",
                                         "enable.auto.commit": False, "enable.partition.eof": True,
                                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        tp = confluent_kafka.TopicPartition(topic, partition)
        low, high = wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=5), "the watermarks", timeout)
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, low)])
        values: list[bytes] = []
        next_offset = low
        deadline = time.monotonic() + timeout
        while next_offset < high:
            assert time.monotonic() < deadline, f"read {topic}-{partition} only up to {next_offset} of {high}"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
                continue
            assert msg.offset() == next_offset, f"offset {msg.offset()} read where {next_offset} was expected"
            values.append(msg.value())
            next_offset += 1
        return values
    finally:
        consumer.close()


def partition_dir(broker: BrokerProcess, topic: str, partition: int = 0) -> Path:
    return broker.log_dir / f"{topic}-{partition}"


def segment_files(broker: BrokerProcess, topic: str, partition: int = 0) -> dict[str, bytes]:
    """The replica's log segments (``*.log``) by name; indexes are local and may differ."""
    directory = partition_dir(broker, topic, partition)
    return {f.name: f.read_bytes() for f in sorted(directory.glob("*.log"))}


def segments_identical(brokers: Sequence[BrokerProcess], topic: str, partition: int = 0) -> bool:
    """Every replica's segments hold the same bytes (checked while they may still be copying)."""
    contents = [segment_files(b, topic, partition) for b in brokers]
    return all(c == contents[0] for c in contents[1:]) and bool(contents[0])
