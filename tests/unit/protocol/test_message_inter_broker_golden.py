"""Byte-exact checks of the ZooKeeper-mode inter-broker requests against hand-built layouts.

kafka-python (used for the cross-checks elsewhere) ships Kafka 4.x definitions, which
dropped these APIs, so their layouts are spelled out here field by field instead.
"""

from __future__ import annotations

import struct
import uuid

from protocol.messages import ControlledShutdownRequest, LeaderAndIsrRequest

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _compact_string(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def _int32s(values: list[int]) -> bytes:
    return struct.pack(f">i{len(values)}i", len(values), *values)


def _compact_int32s(values: list[int]) -> bytes:
    return bytes([len(values) + 1]) + struct.pack(f">{len(values)}i", *values)


def _partition_state(**overrides: object) -> LeaderAndIsrRequest.LeaderAndIsrPartitionState:
    fields = dict(partition_index=2, controller_epoch=7, leader=1, leader_epoch=4, isr=[1, 3], partition_epoch=9,
                  replicas=[1, 3, 5], is_new=True)
    fields.update(overrides)
    return LeaderAndIsrRequest.LeaderAndIsrPartitionState(**fields)


def test_leader_and_isr_v1_layout() -> None:
    request = LeaderAndIsrRequest(
        controller_id=5, controller_epoch=7,
        ungrouped_partition_states=[_partition_state(topic_name="orders")],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="b1", port=9092)])
    expected = (
        struct.pack(">ii", 5, 7)
        + struct.pack(">i", 1) + _string("orders") + struct.pack(">iiii", 2, 7, 1, 4) + _int32s([1, 3])
        + struct.pack(">i", 9) + _int32s([1, 3, 5]) + b"\x01"
        + struct.pack(">i", 1) + struct.pack(">i", 1) + _string("b1") + struct.pack(">i", 9092)
    )
    assert request.encode(1) == expected
    assert LeaderAndIsrRequest.decode(expected, 1) == request


def test_leader_and_isr_v5_flexible_layout() -> None:
    request = LeaderAndIsrRequest(
        controller_id=5, controller_epoch=7, broker_epoch=123, type=1,
        topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
            topic_name="orders", topic_id=TOPIC_ID, partition_states=[_partition_state(adding_replicas=[5])])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="b1", port=9092)])
    partition = (struct.pack(">iiii", 2, 7, 1, 4) + _compact_int32s([1, 3]) + struct.pack(">i", 9)
                 + _compact_int32s([1, 3, 5]) + _compact_int32s([5]) + _compact_int32s([]) + b"\x01" + b"\x00")
    expected = (
        struct.pack(">iiqb", 5, 7, 123, 1)
        + b"\x02" + _compact_string("orders") + TOPIC_ID.bytes + b"\x02" + partition + b"\x00"
        + b"\x02" + struct.pack(">i", 1) + _compact_string("b1") + struct.pack(">i", 9092) + b"\x00"
        + b"\x00"
    )
    assert request.encode(5) == expected
    assert LeaderAndIsrRequest.decode(expected, 5) == request


def test_controlled_shutdown_layouts() -> None:
    request = ControlledShutdownRequest(broker_id=3, broker_epoch=77)
    assert request.encode(2) == struct.pack(">iq", 3, 77)
    assert request.encode(3) == struct.pack(">iq", 3, 77) + b"\x00"
    assert ControlledShutdownRequest(broker_id=3).encode(0) == struct.pack(">i", 3)
