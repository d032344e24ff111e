"""The leader of a share-partition SIGKILLed in a three-broker cluster: the new leader reads the
share-group state from the share coordinator and goes on where the old one stopped."""

from __future__ import annotations

import pytest

from tests.harness.broker import BrokerCluster
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import unique
from tests.integration.share.share_helpers import drain, produce, share_consumer, warm_up

REPLICATED = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
              "share.coordinator.state.topic.num.partitions": "3", "share.coordinator.state.topic.min.isr": "1",
              "group.share.record.lock.duration.ms": "60000",
              # the dead broker leaves the ISRs soon, so acks=all state writes go on without it
              "replica.lag.time.max.ms": "5000"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cluster3", [REPLICATED], indirect=True, ids=["replicated"])
def test_a_new_leader_keeps_the_share_partition_state(cluster3: BrokerCluster) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = unique("failover"), unique("g")
    first = cluster3.brokers[0]
    first.create_topic(topic, 1, replication_factor=3)
    leader_id = first.metadata([topic]).topics[0].partitions[0].leader_id
    leader = cluster3.brokers[leader_id]
    survivors = [b for b in cluster3.brokers if b is not leader]
    consumer = share_consumer(survivors[0], group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        warm_up(survivors[0], topic, consumer)
        values = [f"r{i}".encode() for i in range(10)]
        produce(survivors[0], topic, values)
        got = sorted(drain([consumer], 10)[0], key=lambda m: m.offset())
        for message in got[:4]:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.acknowledge(got[4], AcknowledgeType.RELEASE)
        consumer.acknowledge(got[5], AcknowledgeType.REJECT)
        consumer.commit_sync(30)  # r6..r9 stay acquired, unacknowledged
        leader.kill()
    finally:
        consumer.close()
    wait_for(lambda: survivors[0].metadata([topic]).topics[0].partitions[0].leader_id not in (-1, leader_id),
             "a new leader", 90)
    successor = share_consumer(survivors[0], group)
    successor.subscribe([topic])
    try:
        redelivered = drain([successor], 5, timeout=120)[0]
        assert sorted(m.value() for m in redelivered) == [b"r4", b"r6", b"r7", b"r8", b"r9"]
        assert {m.delivery_count() for m in redelivered} == {2}
        successor.commit_sync(30)
        produce(survivors[0], topic, [b"after"])
        assert [m.value() for m in drain([successor], 1)[0]] == [b"after"]
    finally:
        successor.close()
