"""Several brokers and the controller's requests between them, on real processes."""
from __future__ import annotations

import time
import uuid
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import MetadataRequest, ProduceRequest
from protocol.records.batch import read_batch_header
from protocol.records.builder import RecordBatchBuilder
from protocol.records.compression import CompressionType
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for


def _batch(value: bytes) -> bytearray:
    builder = RecordBatchBuilder(magic=2)
    builder.append(int(time.time() * 1000), None, value)  # within retention
    return builder.build()


def _produce(broker: BrokerProcess, topic: str, partition: int, value: bytes, acks: int = 1,
             timeout_ms: int = 1000) -> Any:
    request = ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=_batch(value))])])
    return broker.request(ApiKey.PRODUCE, 10, request).responses[0].partition_responses[0]



def test_three_brokers_share_metadata_and_enforce_leadership(cluster3: BrokerCluster) -> None:
    topic = f"c-{uuid.uuid4().hex[:8]}"
    first = cluster3.brokers[0]
    first.create_topic(topic, partitions=3, replication_factor=3)
    for broker in cluster3.brokers:
        broker.wait_for_leaders(topic, 3)
    views = [[(p.partition_index, p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes))
              for p in b.metadata([topic]).topics[0].partitions] for b in cluster3.brokers]
    assert views[0] == views[1] == views[2]
    assert sorted(b.node_id for b in first.metadata().brokers) == [0, 1, 2]
    assert {leader for _, leader, _, _ in views[0]} == {0, 1, 2}  # leadership is spread
    for partition, leader, _, _ in views[0]:
        assert _produce(cluster3.brokers[leader], topic, partition, b"x").error_code == 0
        follower = cluster3.brokers[(leader + 1) % 3]
        wrong = _produce(follower, topic, partition, b"x")
        assert wrong.error_code == Errors.NOT_LEADER_OR_FOLLOWER
        assert (wrong.current_leader.leader_id, wrong.current_leader.leader_epoch) == (leader, 0)  # KIP-951
        # The followers replicate, so acks=all completes once both have the batch.
        assert _produce(cluster3.brokers[leader], topic, partition, b"y", acks=-1, timeout_ms=10000).error_code == 0


def test_controlled_shutdown_moves_leadership(cluster3: BrokerCluster) -> None:
    topic = f"s-{uuid.uuid4().hex[:8]}"
    survivor = cluster3.brokers[0]
    survivor.create_topic(topic, partitions=3, replication_factor=3)
    victim = next(b for b in cluster3.brokers[1:]
                  if any(p.leader_id == b.broker_id for p in survivor.metadata([topic]).topics[0].partitions))
    assert victim.stop() == 0
    assert "Controlled shutdown request returned successfully" in victim.log_tail(200)
    partitions = wait_for(lambda: (ps := survivor.metadata([topic]).topics[0].partitions)
                       and all(p.leader_id not in (victim.broker_id, -1) for p in ps) and ps, "new leaders")
    assert all(victim.broker_id not in p.isr_nodes for p in partitions)
    # Metadata v0 lists only reachable replicas and flags the partition; later versions list them all.
    v0 = survivor.request(ApiKey.METADATA, 0, MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=topic)]))
    assert all(p.error_code == Errors.REPLICA_NOT_AVAILABLE and victim.broker_id not in p.replica_nodes
               for p in v0.topics[0].partitions)
    assert all(victim.broker_id in p.replica_nodes for p in partitions)


def test_topic_config_change_and_deletion_reach_the_broker(broker: BrokerProcess) -> None:
    from coordination.admin_zk_client import AdminZkClient
    from coordination.kafka_zk_client import KafkaZkClient

    topic = f"d-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    zk = KafkaZkClient.connect(broker.zk_connect, 10000)
    try:
        admin = AdminZkClient(zk)
        admin.change_configs("topics", topic, {"compression.type": "zstd"})

        def stored_codec() -> int:
            offset = _produce(broker, topic, 0, b"v").base_offset
            from protocol.messages import FetchRequest
            request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
                FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
            records = broker.request(ApiKey.FETCH, 12, request).responses[0].partitions[0].records
            return read_batch_header(bytes(records), 0).compression

        wait_for(lambda: stored_codec() == CompressionType.ZSTD, "the new compression.type")
        log_dir = broker.log_dir / f"{topic}-0"
        assert log_dir.exists()
        admin.delete_topic(topic)
        wait_for(lambda: not log_dir.exists(), "the log to be deleted")
        wait_for(lambda: broker.metadata([topic]).topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION,
              "the topic to leave the metadata")
    finally:
        zk.close()


def test_acks_all_completes_when_followers_fetch_up_to_it(cluster3: BrokerCluster) -> None:
    import threading

    from protocol.messages import FetchRequest

    topic = f"f-{uuid.uuid4().hex[:8]}"
    cluster3.brokers[0].create_topic(topic, partitions=1, replication_factor=3)
    state = cluster3.brokers[0].metadata([topic]).topics[0].partitions[0]
    leader = cluster3.brokers[state.leader_id]
    # The controller sends each broker LeaderAndIsr before UpdateMetadata: once the leader's own
    # metadata shows the partition, it leads it.
    leader.wait_for_leaders(topic, 1)
    followers = [r for r in state.replica_nodes if r != state.leader_id]
    results: list[Any] = []
    producer = threading.Thread(
        target=lambda: results.append(_produce(leader, topic, 0, b"replicated", acks=-1, timeout_ms=4000)))
    producer.start()

    def follower_fetch(replica_id: int) -> Any:
        request = FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])])
        return leader.request(ApiKey.FETCH, 12, request).responses[0].partitions[0]

    # Act as the followers: each reports (by fetching from offset 1) that it has offset 0.
    while producer.is_alive():
        for replica_id in followers:
            follower_fetch(replica_id)
        time.sleep(0.05)
    producer.join()
    assert (results[0].error_code, results[0].base_offset) == (0, 0)
    assert follower_fetch(followers[0]).high_watermark == 1
