"""Share-group state survives the broker: SIGKILLed mid-stream and restarted, it delivers no
accepted record again, loses no unacknowledged one, and keeps the delivery counts."""

from __future__ import annotations

import pytest

from tests.harness.broker import BrokerProcess
from tests.integration.groups.group_helpers import unique
from tests.integration.share.share_helpers import STATE_TOPIC, drain, produce, share_consumer, warm_up

# a snapshot every other state write, so the state topic gets pruned in the test too
OVERRIDES = {"offsets.topic.num.partitions": "1", **STATE_TOPIC, "group.share.record.lock.duration.ms": "60000",
             "share.coordinator.snapshot.update.records.per.snapshot": "2"}


def _state_log_start(broker: BrokerProcess, group: str, topic: str) -> int:
    """The log start offset of the __share_group_state partition that holds the share-partition."""
    from broker.coordinator.internal_topic import partition_for
    from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, coordinator_key
    from protocol.api_keys import ApiKey
    from protocol.messages import ListOffsetsRequest as L

    topic_id = broker.metadata([topic]).topics[0].topic_id
    partition = partition_for(coordinator_key(group, topic_id, 0), int(STATE_TOPIC[
        "share.coordinator.state.topic.num.partitions"]))
    answer = broker.request(ApiKey.LIST_OFFSETS, 7, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=SHARE_GROUP_STATE_TOPIC, partitions=[L.ListOffsetsPartition(partition_index=partition, timestamp=-2)])]))
    return answer.topics[0].partitions[0].offset


@pytest.mark.timeout(300)
@pytest.mark.parametrize("broker", [OVERRIDES], indirect=True, ids=["share"])
def test_a_killed_and_restarted_broker_keeps_the_share_group_state(broker: BrokerProcess) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = unique("durable"), unique("g")
    broker.create_topic(topic, 1)
    consumer = share_consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        warm_up(broker, topic, consumer)
        values = [f"r{i}".encode() for i in range(10)]
        produce(broker, topic, values)
        got = sorted(drain([consumer], 10)[0], key=lambda m: m.offset())
        assert [m.value() for m in got] == values
        for message in got[:4]:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.acknowledge(got[4], AcknowledgeType.RELEASE)
        consumer.acknowledge(got[5], AcknowledgeType.REJECT)
        consumer.commit_sync(30)  # r6..r9 stay acquired (locked for a minute), unacknowledged
        broker.kill()
    finally:
        consumer.close()
    broker.wait_until_deregistered(60)  # the killed broker's ZooKeeper session expires first
    broker.start()
    successor = share_consumer(broker, group)
    successor.subscribe([topic])
    try:
        redelivered = drain([successor], 5, timeout=90)[0]
        assert sorted(m.value() for m in redelivered) == [b"r4", b"r6", b"r7", b"r8", b"r9"]
        assert {m.delivery_count() for m in redelivered} == {2}  # counts survived the restart
        successor.commit_sync(30)
        produce(broker, topic, [b"after"])
        assert [m.value() for m in drain([successor], 1)[0]] == [b"after"]  # r0..r3, r5 never again
        assert _state_log_start(broker, group, topic) > 0  # records before the last snapshot were pruned
    finally:
        successor.close()
