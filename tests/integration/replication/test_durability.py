"""The durability test: acks=all writes survive the leader's broker being killed, over and over.

Three brokers, an RF=3 topic with min.insync.replicas=2. An idempotent librdkafka producer
sends 100,000 numbered messages with acks=all while the broker leading partition 0 is killed
with SIGKILL and restarted, round after round. Afterwards every partition is read from the
beginning: every acknowledged message is there exactly once, in the order it was sent, and
no message at all appears twice.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.numbered_messages import NumberedProducer, check_exactly_once, read_all
from tests.harness.waiting import wait_for

MESSAGES = 100_000
PARTITIONS = 2
KILL_ROUNDS = 4


def _partition_state(broker: BrokerProcess, topic: str, partition: int) -> Any:
    topics = broker.metadata([topic]).topics
    if not topics or topics[0].error_code:
        return None
    return next((p for p in topics[0].partitions if p.partition_index == partition), None)


def test_acknowledged_writes_survive_repeated_leader_kills(zk_connect: str, tmp_path: Path) -> None:
    cluster = BrokerCluster(3, zk_connect, tmp_path)
    try:
        cluster.start()
        topic = f"durable-{uuid.uuid4().hex[:8]}"
        brokers = {b.broker_id: b for b in cluster.brokers}
        cluster.brokers[0].create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                        configs={"min.insync.replicas": "2"})
        producer = NumberedProducer(cluster.bootstrap, topic, PARTITIONS, rate=2500, n=MESSAGES)
        producer.start()
        for round_number in range(KILL_ROUNDS):
            wait_for(lambda: producer.sent > (round_number + 1) * MESSAGES // (KILL_ROUNDS + 2), "producer progress")
            observer = next(b for b in cluster.brokers if b.process is not None)
            state = wait_for(lambda: _partition_state(observer, topic, 0), "partition 0 metadata")
            victim = brokers[state.leader_id]
            victim.kill()
            others = [b for b in cluster.brokers if b is not victim]
            wait_for(lambda: (s := _partition_state(others[0], topic, 0)) is not None
                  and s.leader_id not in (-1, victim.broker_id), f"a new leader after killing {victim}")
            victim.wait_until_deregistered()
            victim.start()
            wait_for(lambda: all(len(p.isr_nodes) == 3 for p in others[0].metadata([topic]).topics[0].partitions),
                  f"{victim} back in every ISR")
        producer.finish(600)
        assert len(producer.acked) == MESSAGES
        check_exactly_once(producer, read_all(cluster.bootstrap, topic, PARTITIONS))
    finally:
        cluster.kill()
