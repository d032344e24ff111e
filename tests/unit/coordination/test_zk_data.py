"""Znode values compared byte for byte with the JSON documented in ZOOKEEPER_LAYOUT.md."""
from __future__ import annotations

import pytest

from coordination.controller_epoch import ControllerEpochFence, StaleControllerEpochError
from coordination.errors import MalformedZnodeError
from coordination.model import (
    BrokerEndPoint,
    BrokerInfo,
    LeaderAndIsr,
    LeaderRecoveryState,
    ProducerIdBlock,
    ReplicaAssignment,
    SecurityProtocol,
    TopicAssignment,
    TopicPartition,
    random_uuid_b64,
    uuid_from_b64,
)
from coordination.zk_admin_data import (
    config_change_entity_path,
    config_entity_path,
    decode_config_change,
    decode_entity_config,
    decode_feature_znode,
    decode_log_dir_event,
    decode_partition_set,
    decode_producer_id_block,
    decode_reassignment,
    desanitize,
    encode_config_change,
    encode_entity_config,
    encode_feature_znode,
    encode_log_dir_event,
    encode_partition_set,
    encode_producer_id_block,
    encode_reassignment,
    sanitize,
)
from coordination.zk_data import (
    decode_broker_info,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic_assignment,
    encode_broker_info,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic_assignment,
)

BROKER_1 = BrokerInfo(
    broker_id=1,
    endpoints=(
        BrokerEndPoint("PLAINTEXT", "broker1.example", 9092, SecurityProtocol.PLAINTEXT),
        BrokerEndPoint("SSL", "broker1.example", 9093, SecurityProtocol.SSL),
    ),
    rack="rack-a",
    timestamp_ms=1718446835000,
)


def test_cluster_id_matches_documented_json() -> None:
    data = encode_cluster_id("3d1XOGWUQq-2TaCwWvBALA")
    assert data == b'{"version":"1","id":"3d1XOGWUQq-2TaCwWvBALA"}'
    assert decode_cluster_id(data) == "3d1XOGWUQq-2TaCwWvBALA"


def test_controller_matches_documented_json() -> None:
    data = encode_controller(1, 1718446800000)
    assert data == b'{"version":2,"brokerid":1,"timestamp":"1718446800000","kraftControllerEpoch":-1}'
    assert decode_controller(data) == 1
    assert decode_controller(b'{"version":1,"brokerid":7,"timestamp":"1"}') == 7


def test_controller_epoch_is_decimal_text() -> None:
    assert encode_controller_epoch(5) == b"5"
    assert decode_controller_epoch(b"5") == 5
    with pytest.raises(MalformedZnodeError):
        decode_controller_epoch(b"five")


def test_broker_registration_matches_documented_json() -> None:
    assert encode_broker_info(BROKER_1) == (
        b'{"version":5,"host":"broker1.example","port":9092,'
        b'"endpoints":["PLAINTEXT://broker1.example:9092","SSL://broker1.example:9093"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
        b'"jmx_port":-1,"timestamp":"1718446835000","rack":"rack-a","features":{}}'
    )


def test_broker_registration_round_trips_with_epoch() -> None:
    decoded = decode_broker_info(1, encode_broker_info(BROKER_1), epoch=42)
    assert decoded == BROKER_1.with_epoch(42)


def test_broker_registration_without_plaintext_or_rack() -> None:
    info = BrokerInfo(2, (BrokerEndPoint("INTERNAL", "::1", 9094, SecurityProtocol.SASL_SSL),))
    data = encode_broker_info(info)
    assert b'"host":null,"port":-1' in data
    assert b'"endpoints":["INTERNAL://[::1]:9094"]' in data
    assert b"rack" not in data
    assert decode_broker_info(2, data) == info


def test_old_broker_registration_versions_are_read() -> None:
    v1 = decode_broker_info(3, b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"5"}')
    assert v1.endpoints == (BrokerEndPoint("PLAINTEXT", "h", 9092, SecurityProtocol.PLAINTEXT),)
    v2 = decode_broker_info(3, b'{"version":2,"host":"h","port":1,"endpoints":["SSL://h:9093"]}')
    assert v2.endpoints[0].security_protocol == SecurityProtocol.SSL


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"version":6,"endpoints":[]}',
        b'{"version":5,"endpoints":["nonsense"]}',
        b'{"version":5,"endpoints":["X://h:1"],"listener_security_protocol_map":{"X":"BOGUS"}}',
    ],
)
def test_malformed_broker_registration_raises_typed_error(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError):
        decode_broker_info(1, data)


def test_topic_assignment_matches_documented_json() -> None:
    assignment = TopicAssignment(
        "vqSmEBIuSwm33bh8npzjMw",
        {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))},
    )
    data = encode_topic_assignment(assignment)
    assert data == (
        b'{"version":3,"topic_id":"vqSmEBIuSwm33bh8npzjMw","partitions":{"0":[1,2,3],"1":[2,3,1]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert decode_topic_assignment("t", data) == assignment


def test_topic_assignment_with_reassignment_and_old_versions() -> None:
    assignment = TopicAssignment(
        "vqSmEBIuSwm33bh8npzjMw", {0: ReplicaAssignment.for_reassignment((1, 2), (2, 3))}
    )
    data = encode_topic_assignment(assignment)
    assert b'"partitions":{"0":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}' in data
    assert decode_topic_assignment("t", data) == assignment
    v1 = decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[4]}}')
    assert v1 == TopicAssignment(None, {0: ReplicaAssignment((4,))})
    with pytest.raises(MalformedZnodeError):
        decode_topic_assignment("t", b'{"version":1,"partitions":{"x":[4]}}')


def test_partition_state_matches_documented_json() -> None:
    state = LeaderAndIsr(leader=1, leader_epoch=12, isr=(1, 2, 3), partition_epoch=7)
    data = encode_partition_state(state, controller_epoch=5)
    assert data == b'{"controller_epoch":5,"leader":1,"version":1,"leader_epoch":12,"isr":[1,2,3]}'
    decoded = decode_partition_state("t", 0, data, zk_version=7)
    assert decoded.leader_and_isr == state and decoded.controller_epoch == 5


def test_partition_state_after_unclean_election_records_recovery() -> None:
    state = LeaderAndIsr(-1, 3, (), partition_epoch=1).new_leader_and_isr(
        2, [2], LeaderRecoveryState.RECOVERING
    )
    data = encode_partition_state(state, 1)
    assert data == (
        b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":4,"isr":[2],'
        b'"leader_recovery_state":1}'
    )
    assert decode_partition_state("t", 0, data, 1).leader_and_isr == state


def test_entity_config_and_change_notification() -> None:
    config = {"retention.ms": "86400000", "cleanup.policy": "compact"}
    data = encode_entity_config(config)
    assert data == b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact"}}'
    assert decode_entity_config("/config/topics/t", data) == config
    assert decode_entity_config("/config/topics/t", None) == {}
    change = encode_config_change(config_change_entity_path("topics", "my-topic"))
    assert change == b'{"version":2,"entity_path":"topics/my-topic"}'
    assert decode_config_change("/x", change).entity_path == "topics/my-topic"
    v1 = decode_config_change("/x", b'{"version":1,"entity_type":"topics","entity_name":"my-topic"}')
    assert (v1.entity_type, v1.entity_name) == ("topics", "my-topic")
    assert config_entity_path("brokers", "<default>") == "/config/brokers/<default>"
    with pytest.raises(MalformedZnodeError):
        decode_config_change("/x", b'{"version":1,"entity_type":"brokers","entity_name":"1"}')


def test_sanitize_like_kafka() -> None:
    assert sanitize("User:alice smith*") == "User%3Aalice%20smith%2A"
    assert sanitize("caf\u00e9.-_") == "caf%C3%A9.-_"
    assert desanitize("User%3Aalice%20smith%2A") == "User:alice smith*"


def test_admin_triggers() -> None:
    tp = TopicPartition("t", 0)
    data = encode_reassignment({tp: (4, 5, 6)})
    assert data == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}'
    assert decode_reassignment(data) == {tp: (4, 5, 6)}
    election = encode_partition_set([tp])
    assert election == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert decode_partition_set("/admin/preferred_replica_election", election) == {tp}
    assert encode_log_dir_event(2) == b'{"version":1,"broker":2,"event":1}'


def test_producer_id_block_uses_string_bounds() -> None:
    block = ProducerIdBlock(1, 4000, 1000)
    data = encode_producer_id_block(block)
    assert data == b'{"version":1,"broker":1,"block_start":"4000","block_end":"4999"}'
    assert decode_producer_id_block(data) == block
    assert decode_producer_id_block(b"") is None


def test_feature_znode() -> None:
    assert encode_feature_znode({}) == b'{"version":2,"status":1,"features":{}}'


def test_uuid_strings() -> None:
    text = random_uuid_b64()
    assert len(text) == 22 and not text.startswith("-")
    assert len(uuid_from_b64(text).bytes) == 16


def test_log_dir_event_and_feature_values_are_read() -> None:
    assert decode_log_dir_event("/log_dir_event_notification/x", encode_log_dir_event(2)) == 2
    with pytest.raises(MalformedZnodeError):
        decode_log_dir_event("/x", b'{"version":1,"broker":2,"event":9}')
    assert decode_feature_znode(encode_feature_znode({})) == (1, {})
    assert decode_feature_znode(b'{"version":1,"status":0,"features":{"f":{"min_version_level":1,"max_version_level":2}}}') == (0, {"f": 2})


def test_controller_epoch_fence_rejects_older_epochs() -> None:
    fence = ControllerEpochFence()
    fence.check_and_update(1, 3)
    fence.check_and_update(2, 3)
    with pytest.raises(StaleControllerEpochError, match="older than the current controller epoch 3"):
        fence.check_and_update(1, 2)
    fence.check_and_update(1, 4)
    assert (fence.controller_id, fence.controller_epoch) == (1, 4)
