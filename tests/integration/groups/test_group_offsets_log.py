"""What the coordinator writes to __consumer_offsets decodes with Kafka's schemas, and a restarted
broker loads groups and offsets back from that log."""
from __future__ import annotations

from kafka import TopicPartition

from protocol import consumer_offsets_records as records
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import OffsetFetchRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import (
    CONSUMER_TIMEOUTS,
    commit,
    describe_group,
    offsets_log_records,
    produce,
    request,
    stable_member,
    unique,
    wait_for_coordinator,
)


def test_log_records_decode_with_kafkas_schemas(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata

    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, 2)
    produce(broker.bootstrap, topic, 2, 3)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, client_id="log-test",
                             auto_offset_reset="earliest", enable_auto_commit=False, **CONSUMER_TIMEOUTS)
    try:
        def assigned() -> bool:
            consumer.poll(timeout_ms=200)
            return len(consumer.assignment()) == 2

        wait_for(assigned, "the assignment", 60)
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "hello", -1),
                         TopicPartition(topic, 1): OffsetAndMetadata(3, "", -1)})
    finally:
        consumer.close()

    # The Empty generation is stored after LeaveGroup is answered (Kafka's coordinator answers the
    # leave, then writes the group once its rebalance completes): read the log once it is there.
    def group_emptied() -> list[tuple[object, object]] | None:
        found = offsets_log_records(broker, group)
        last = [v for k, v in found if isinstance(k, records.GroupMetadataKey)][-1:]
        return found if last and last[0] is not None and last[0].members == [] else None

    decoded = wait_for(group_emptied, "the group's Empty generation in the log", 30)
    commits = {(k.topic, k.partition): v for k, v in decoded if isinstance(k, records.OffsetCommitKey)}
    assert {tp: (v.offset, v.metadata) for tp, v in commits.items()} == {(topic, 0): (2, "hello"), (topic, 1): (3, "")}
    assert all(v.version == 3 and v.commit_timestamp > 0 for v in commits.values())
    metadata = [v for k, v in decoded if isinstance(k, records.GroupMetadataKey)]
    assert metadata, "no group metadata record"
    stable = [v for v in metadata if v.members]
    assert stable and stable[-1].protocol_type == "consumer" and stable[-1].protocol == "range"
    assert stable[-1].members[0].client_id == "log-test" and stable[-1].members[0].assignment
    # the consumer left: the last record is the group's Empty generation
    assert metadata[-1].members == [] and metadata[-1].generation > stable[-1].generation


def test_restarted_broker_loads_groups_and_offsets(broker: BrokerProcess) -> None:
    topic, simple, managed = unique("t"), unique("g"), unique("g")
    broker.create_topic(topic, 1)
    wait_for_coordinator(broker, simple)
    wait_for_coordinator(broker, managed)
    assert commit(broker, simple, topic, offset=42, metadata="kept") is Errors.NONE
    member_id, generation = stable_member(broker, managed)
    assert commit(broker, managed, topic, member_id=member_id, generation=generation, offset=7) is Errors.NONE

    broker.stop()
    broker.start()
    wait_for_coordinator(broker, simple)

    def fetch(group: str) -> tuple[int, str] | None:
        response = request(broker, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
        if response.error_code != Errors.NONE:  # e.g. COORDINATOR_LOAD_IN_PROGRESS
            return None
        partition = response.topics[0].partitions[0]
        return partition.committed_offset, partition.metadata

    # Each partition loads on its own (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
    assert wait_for(lambda: fetch(simple), "the reloaded offsets", 30) == (42, "kept")
    assert wait_for(lambda: fetch(managed), "the reloaded offsets", 30) == (7, "")
    loaded = describe_group(broker, managed)
    assert loaded.group_state == "Stable" and [m.member_id for m in loaded.members] == [member_id]
    # The loaded member never heartbeats again: its session expires and the group empties.
    wait_for(lambda: describe_group(broker, managed).group_state == "Empty", "the loaded member to expire", 30)
