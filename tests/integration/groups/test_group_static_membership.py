"""Static membership (group.instance.id): a restarted member gets its partitions back with no rebalance."""
from __future__ import annotations

from typing import Any

from protocol import consumer_offsets_records as records
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import (
    CONFLUENT_TIMEOUTS,
    describe_group,
    offsets_log_records,
    unique,
)

PARTITIONS = 4


def _static_consumer(broker: BrokerProcess, group: str, instance: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.instance.id": instance,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **CONFLUENT_TIMEOUTS,
                         # long enough that the restart below is well within the session
                         "session.timeout.ms": 30000})


def _subscribe(consumer: Any, topic: str, assigned: list[list[int]]) -> None:
    consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.append(sorted(p.partition for p in parts)))


def _generations(broker: BrokerProcess, group: str) -> list[int]:
    return [v.generation for k, v in offsets_log_records(broker, group)
            if isinstance(k, records.GroupMetadataKey) and v is not None]


def test_restarted_static_member_keeps_its_partitions_without_a_rebalance(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    a_assigned: list[list[int]] = []
    b_assigned: list[list[int]] = []
    a = _static_consumer(broker, group, "instance-a")
    b = _static_consumer(broker, group, "instance-b")
    try:
        _subscribe(a, topic, a_assigned)
        _subscribe(b, topic, b_assigned)

        def balanced() -> bool:
            a.poll(0.1)
            b.poll(0.1)
            parts = {p.partition for p in a.assignment()}, {p.partition for p in b.assignment()}
            return bool(parts[0] and parts[1]) and parts[0] | parts[1] == set(range(PARTITIONS)) \
                and describe_group(broker, group).group_state == "Stable"

        wait_for(balanced, "both static members to be assigned", 60)
        before = describe_group(broker, group)
        members_before = {m.group_instance_id: m for m in before.members}
        a_partitions = sorted(p.partition for p in a.assignment())
        b_calls = len(b_assigned)
        generation = max(_generations(broker, group))

        a.close()  # a static member does not leave the group on close
        assert describe_group(broker, group).group_state == "Stable"
        a = _static_consumer(broker, group, "instance-a")
        _subscribe(a, topic, a_assigned)
        calls_before_restart = len(a_assigned)

        def a_back() -> bool:
            a.poll(0.1)
            b.poll(0.1)
            return len(a_assigned) > calls_before_restart

        wait_for(a_back, "the restarted static member's assignment", 60)
        assert a_assigned[-1] == a_partitions
        for _ in range(10):  # give b every chance to see a rebalance it must not get
            b.poll(0.1)
        assert len(b_assigned) == b_calls

        after = describe_group(broker, group)
        members_after = {m.group_instance_id: m for m in after.members}
        assert after.group_state == "Stable"
        assert members_after["instance-a"].member_id != members_before["instance-a"].member_id
        assert members_after["instance-b"].member_id == members_before["instance-b"].member_id
        assert members_after["instance-a"].member_assignment == members_before["instance-a"].member_assignment
        # The coordinator stored the new member id under the same generation: no rebalance happened.
        assert _generations(broker, group)[-1] == generation
        last = [v for k, v in offsets_log_records(broker, group) if isinstance(k, records.GroupMetadataKey)][-1]
        assert {m.group_instance_id: m.member_id for m in last.members}["instance-a"] == \
            members_after["instance-a"].member_id
    finally:
        a.close()
        b.close()
