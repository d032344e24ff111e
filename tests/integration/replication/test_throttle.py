"""Throttled reassignment: a replica being copied is held to the throttle rate, and finishes
once the throttle is lifted (the way kafka-reassign-partitions --throttle drives it)."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

MESSAGES = 3000
VALUE = b"v" * 1000



def _alter(admin: AdminClient, resources: list[ConfigResource]) -> None:
    for resource in resources:  # librdkafka takes one broker resource per call
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)


def _entry(name: str, value: str | None, op: AlterConfigOpType = AlterConfigOpType.SET) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=op)


def _segment_bytes(broker: BrokerProcess, topic: str) -> int:
    directory = broker.log_dir / f"{topic}-0"
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.is_dir() else 0


def _in_progress(controller: BrokerProcess) -> list[int]:
    listed = controller.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                                ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None))
    return [p.partition_index for t in listed.topics for p in t.partitions]


def test_throttled_reassignment_waits_for_the_quota(zk_connect: str, tmp_path: Path) -> None:
    cluster = BrokerCluster(2, zk_connect, tmp_path)
    admin = None
    try:
        cluster.start()
        topic = f"throttled-{uuid.uuid4().hex[:8]}"
        cluster.brokers[0].create_topic(topic, partitions=1, replication_factor=1)
        leader = cluster.brokers[0].metadata([topic]).topics[0].partitions[0].leader_id
        source, target = cluster.brokers[leader], cluster.brokers[1 - leader]
        src, tgt = str(source.broker_id), str(target.broker_id)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
        for _ in range(MESSAGES):
            producer.produce(topic, VALUE, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        total = _segment_bytes(source, topic)
        assert total > 2_500_000

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        _alter(admin, [
            ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
                _entry("leader.replication.throttled.replicas", f"0:{src}"),
                _entry("follower.replication.throttled.replicas", f"0:{tgt}")]),
            ConfigResource(ResourceType.BROKER, src, incremental_configs=[
                _entry("leader.replication.throttled.rate", "1000")]),
            ConfigResource(ResourceType.BROKER, tgt, incremental_configs=[
                _entry("follower.replication.throttled.rate", "1000")]),
        ])
        for broker, kind in ((source, "LeaderReplication"), (target, "FollowerReplication")):
            wait_for(lambda: f"{kind} throttle is now 1000.0 bytes/s" in broker.log_tail(400), f"{kind} throttle")
            wait_for(lambda: f"{kind} throttled partitions of {topic}: [0]" in broker.log_tail(400),
                  f"{kind} throttled replicas")

        controller = next(b for b in cluster.brokers if b.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                                                                  ListPartitionReassignmentsRequest(
                                                                      timeout_ms=10000, topics=None)).error_code == 0)
        response = controller.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
            timeout_ms=15000, topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
                AlterPartitionReassignmentsRequest.ReassignablePartition(
                    partition_index=0, replicas=[source.broker_id, target.broker_id])])]))
        assert response.error_code == 0 and response.responses[0].partitions[0].error_code == 0
        wait_for(lambda: _segment_bytes(target, topic) > 0, "the new replica's first fetch")
        # At 1000 bytes/s the first fetch (at most replica.fetch.max.bytes, 1 MiB) uses the quota
        # for minutes: the copy cannot finish while the throttle holds.
        time.sleep(3)
        assert _in_progress(controller) == [0]
        assert 0 < _segment_bytes(target, topic) < total

        _alter(admin, [
            ConfigResource(ResourceType.BROKER, src, incremental_configs=[
                _entry("leader.replication.throttled.rate", None, AlterConfigOpType.DELETE)]),
            ConfigResource(ResourceType.BROKER, tgt, incremental_configs=[
                _entry("follower.replication.throttled.rate", None, AlterConfigOpType.DELETE)]),
        ])
        wait_for(lambda: not _in_progress(controller), "the reassignment to finish once unthrottled")
        assert sorted(source.metadata([topic]).topics[0].partitions[0].isr_nodes) == [0, 1]
        segment = "00000000000000000000.log"
        assert (target.log_dir / f"{topic}-0" / segment).read_bytes() == \
            (source.log_dir / f"{topic}-0" / segment).read_bytes()
    finally:
        del admin
        cluster.stop()
