"""Helpers shared by the consumer-group integration tests (real broker processes)."""
from __future__ import annotations

import uuid
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import FindCoordinatorRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for

CONSUMER_TIMEOUTS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}
CONFLUENT_TIMEOUTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, prefix: str = "m") -> list[bytes]:
    """``per_partition`` messages into each partition (acks=all); returns every value written."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    values = []
    try:
        for p in range(partitions):
            for i in range(per_partition):
                value = f"{prefix}-{p}-{i}".encode()
                producer.send(topic, value, partition=p)
                values.append(value)
        producer.flush(30)
    finally:
        producer.close()
    return values


def wait_for_coordinator(broker: BrokerProcess, group: str, timeout: float = 30.0) -> int:
    """FindCoordinator until the group has one (the first call creates __consumer_offsets)."""
    def probe() -> int | None:
        response = broker.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
        return response.node_id + 1 if response.error_code == Errors.NONE else None  # +1: node 0 is truthy

    return wait_for(probe, f"a coordinator for {group}", timeout) - 1


def request(broker: BrokerProcess, api_key: ApiKey, version: int, body: Any) -> Any:
    return broker.request(int(api_key), version, body)


def offsets_log_records(broker: BrokerProcess, group: str, partitions: int = 50) -> list[tuple[Any, Any]]:
    """Decode (key, value) of every record in the group's __consumer_offsets partition, straight from
    the segment files (value None for tombstones) with protocol.consumer_offsets_records."""
    from broker.coordinator.internal_topic import partition_for
    from protocol import consumer_offsets_records as records
    from protocol.records.log_entry import decode_entry_records, iter_log_entries

    directory = broker.log_dir / f"__consumer_offsets-{partition_for(group, partitions)}"
    decoded: list[tuple[Any, Any]] = []
    for segment in sorted(directory.glob("*.log")):
        buf = segment.read_bytes()
        for pos, _header in iter_log_entries(buf):
            for record in decode_entry_records(buf, pos):
                key = records.decode_key(bytes(record.key))
                if record.value is None:
                    value = None
                elif isinstance(key, records.OffsetCommitKey):
                    value = records.decode_offset_commit_value(bytes(record.value))
                else:
                    value = records.decode_group_metadata_value(bytes(record.value))
                decoded.append((key, value))
    return [(k, v) for k, v in decoded if k.group == group]


def describe_group(broker: BrokerProcess, group: str) -> Any:
    from protocol.messages import DescribeGroupsRequest

    response = broker.request(int(ApiKey.DESCRIBE_GROUPS), 5, DescribeGroupsRequest(
        groups=[group], include_authorized_operations=False))
    described = response.groups[0]
    assert described.error_code == Errors.NONE, Errors(described.error_code)
    return described


JOIN_VERSION = 5


def join_group(broker: BrokerProcess, group: str, member_id: str = "", protocol_type: str = "consumer",
               session_ms: int = 10000, protocols: list[tuple[str, bytes]] | None = None,
               instance: str | None = None) -> Any:
    body = JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10000,
                            member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                                       for n, m in (protocols if protocols is not None else [("range", b"x")])])
    return request(broker, ApiKey.JOIN_GROUP, JOIN_VERSION, body)


def stable_member(broker: BrokerProcess, group: str) -> tuple[str, int]:
    """Join ``group`` as its only member (v5, with the MEMBER_ID_REQUIRED round trip) and sync: (member id,
    generation) of the now Stable group."""
    first = join_group(broker, group)
    assert first.error_code == Errors.MEMBER_ID_REQUIRED and first.member_id
    joined = join_group(broker, group, member_id=first.member_id)
    assert joined.error_code == Errors.NONE and joined.leader == joined.member_id == first.member_id
    synced = request(broker, ApiKey.SYNC_GROUP, 3, SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a")]))
    assert synced.error_code == Errors.NONE and synced.assignment == b"a"
    return joined.member_id, joined.generation_id


def commit(broker: BrokerProcess, group: str, topic: str, partition: int = 0, member_id: str = "",
           generation: int = -1, metadata: str | None = None, offset: int = 5, version: int = 8) -> Errors:
    body = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                               topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                                   OffsetCommitRequest.OffsetCommitRequestPartition(
                                       partition_index=partition, committed_offset=offset,
                                       committed_metadata=metadata)])])
    response = request(broker, ApiKey.OFFSET_COMMIT, version, body)
    return Errors(response.topics[0].partitions[0].error_code)
