"""Paths and value formats of the cluster's core znodes (Kafka's ZkData): cluster id, controller,
broker registrations, topic assignments and partition states.

Writers produce the newest version Kafka 3.9 writes, compact JSON with keys in the order of
ZOOKEEPER_LAYOUT.md; readers accept every version Kafka accepts and raise MalformedZnodeError for
anything else.
"""
from __future__ import annotations

import json
import re
from typing import Any

from coordination.errors import MalformedZnodeError
from coordination.model import (
    BrokerEndPoint,
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    SecurityProtocol,
    TopicAssignment,
)

# --- paths -------------------------------------------------------------------------------------

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQ_ID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"
CONSUMERS_PATH = "/consumers"

# "groups" is not Kafka 3.9's: group configs (Kafka 4's GROUP resource) kept the way the others are.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips", "groups")

# Created (empty, persistent) by every broker at startup: KafkaZkClient.createTopLevelPaths.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQ_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES)


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# --- JSON helpers --------------------------------------------------------------------------------


def kafka_json(value: Any) -> bytes:
    """Serialize like Kafka's Json.encodeAsBytes: compact, UTF-8, keys in the given order."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json_object(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise MalformedZnodeError(path, "empty value", data)
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedZnodeError(path, f"not JSON: {exc}", data) from None
    if not isinstance(value, dict):
        raise MalformedZnodeError(path, "not a JSON object", data)
    return value


def require(path: str, obj: dict[str, Any], key: str, kind: type | tuple[type, ...], data: bytes | None) -> Any:
    """`obj[key]` checked against `kind` (bool is never accepted as int)."""
    if key not in obj:
        raise MalformedZnodeError(path, f"missing field {key!r}", data)
    value = obj[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise MalformedZnodeError(path, f"field {key!r} has type bool", data)
    if not isinstance(value, kind):
        raise MalformedZnodeError(path, f"field {key!r} has type {type(value).__name__}", data)
    return value


def require_int_list(path: str, value: Any, what: str, data: bytes | None) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise MalformedZnodeError(path, f"{what} is not a list of integers", data)
    return tuple(value)


def require_long_string(path: str, obj: dict[str, Any], key: str, data: bytes | None) -> int:
    """A field Kafka writes as a string holding a decimal long (timestamps, producer id bounds)."""
    value = require(path, obj, key, (str, int), data)
    try:
        return int(value)
    except ValueError:
        raise MalformedZnodeError(path, f"field {key!r} is not a decimal number", data) from None


def require_version(path: str, obj: dict[str, Any], supported: range, data: bytes | None) -> int:
    version = require(path, obj, "version", (int, str), data)
    try:
        version = int(version)
    except ValueError:
        raise MalformedZnodeError(path, "version is not a number", data) from None
    if version not in supported:
        raise MalformedZnodeError(path, f"unsupported version {version}", data)
    return version


# --- /cluster/id ---------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return kafka_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    obj = parse_json_object(CLUSTER_ID_PATH, data)
    return require(CLUSTER_ID_PATH, obj, "id", str, data)


# --- /controller and /controller_epoch -----------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
    return kafka_json(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": kraft_controller_epoch,
        }
    )


def decode_controller(data: bytes | None) -> int:
    """The controller's broker id (older writers omit everything but `brokerid`)."""
    obj = parse_json_object(CONTROLLER_PATH, data)
    return require(CONTROLLER_PATH, obj, "brokerid", int, data)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise MalformedZnodeError(CONTROLLER_EPOCH_PATH, "not a decimal integer", data) from None


# --- /brokers/ids/<id> ---------------------------------------------------------------------------

BROKER_INFO_VERSION = 5
_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def encode_broker_info(info: BrokerInfo) -> bytes:
    plaintext = next(
        (ep for ep in info.endpoints if ep.security_protocol == SecurityProtocol.PLAINTEXT), None
    )
    value: dict[str, Any] = {
        "version": BROKER_INFO_VERSION,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [ep.connection_string for ep in info.endpoints],
        "listener_security_protocol_map": {
            ep.listener: ep.security_protocol.name for ep in info.endpoints
        },
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms),
    }
    if info.rack is not None:
        value["rack"] = info.rack
    value["features"] = {
        name: {"min_version": low, "max_version": high} for name, (low, high) in info.features.items()
    }
    return kafka_json(value)


def _security_protocol(path: str, name: str, data: bytes | None) -> SecurityProtocol:
    try:
        return SecurityProtocol[name]
    except KeyError:
        raise MalformedZnodeError(path, f"unknown security protocol {name!r}", data) from None


def decode_broker_info(broker_id: int, data: bytes | None, epoch: int = -1) -> BrokerInfo:
    path = broker_id_path(broker_id)
    obj = parse_json_object(path, data)
    version = require_version(path, obj, range(1, BROKER_INFO_VERSION + 1), data)
    if version == 1:
        host = require(path, obj, "host", str, data)
        port = require(path, obj, "port", int, data)
        endpoints: tuple[BrokerEndPoint, ...] = (
            BrokerEndPoint("PLAINTEXT", host, port, SecurityProtocol.PLAINTEXT),
        )
    else:
        protocol_map = obj.get("listener_security_protocol_map")
        if protocol_map is not None and not isinstance(protocol_map, dict):
            raise MalformedZnodeError(path, "listener_security_protocol_map is not an object", data)
        parsed = []
        for text in require(path, obj, "endpoints", list, data):
            match = _ENDPOINT_RE.match(text) if isinstance(text, str) else None
            if match is None:
                raise MalformedZnodeError(path, f"bad endpoint {text!r}", data)
            listener, host, port = match.group(1), match.group(2), int(match.group(3))
            protocol_name = protocol_map.get(listener) if protocol_map is not None else listener
            if not isinstance(protocol_name, str):
                raise MalformedZnodeError(path, f"no security protocol for listener {listener}", data)
            parsed.append(BrokerEndPoint(listener, host, port, _security_protocol(path, protocol_name, data)))
        endpoints = tuple(parsed)
    rack = obj.get("rack") if version >= 3 else None
    if rack is not None and not isinstance(rack, str):
        raise MalformedZnodeError(path, "rack is not a string", data)
    features: dict[str, tuple[int, int]] = {}
    raw_features = obj.get("features") or {}
    if not isinstance(raw_features, dict):
        raise MalformedZnodeError(path, "features is not an object", data)
    for name, levels in raw_features.items():
        if not isinstance(levels, dict):
            raise MalformedZnodeError(path, f"feature {name!r} is not an object", data)
        features[name] = (
            require(path, levels, "min_version", int, data),
            require(path, levels, "max_version", int, data),
        )
    jmx_port = obj.get("jmx_port", -1)
    timestamp = require_long_string(path, obj, "timestamp", data) if "timestamp" in obj else 0
    return BrokerInfo(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=rack,
        jmx_port=jmx_port if isinstance(jmx_port, int) else -1,
        timestamp_ms=timestamp,
        features=features,
        epoch=epoch,
    )


# --- /brokers/topics/<topic> ---------------------------------------------------------------------

TOPIC_ASSIGNMENT_VERSION = 3


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    parts = sorted(assignment.partitions.items())
    value: dict[str, Any] = {"version": TOPIC_ASSIGNMENT_VERSION}
    if assignment.topic_id is not None:
        value["topic_id"] = assignment.topic_id
    value["partitions"] = {str(p): list(a.replicas) for p, a in parts}
    value["adding_replicas"] = {str(p): list(a.adding_replicas) for p, a in parts if a.adding_replicas}
    value["removing_replicas"] = {str(p): list(a.removing_replicas) for p, a in parts if a.removing_replicas}
    return kafka_json(value)


def _partition_map(path: str, value: Any, what: str, data: bytes | None) -> dict[int, tuple[int, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedZnodeError(path, f"{what} is not an object", data)
    result = {}
    for key, replicas in value.items():
        try:
            partition = int(key)
        except ValueError:
            raise MalformedZnodeError(path, f"{what} key {key!r} is not a partition number", data) from None
        if partition < 0:
            raise MalformedZnodeError(path, f"{what} has negative partition {partition}", data)
        result[partition] = require_int_list(path, replicas, f"{what}[{key}]", data)
    return result


def decode_topic_assignment(topic: str, data: bytes | None) -> TopicAssignment:
    path = topic_path(topic)
    obj = parse_json_object(path, data)
    require_version(path, obj, range(1, TOPIC_ASSIGNMENT_VERSION + 1), data)
    topic_id = obj.get("topic_id")
    if topic_id is not None and not isinstance(topic_id, str):
        raise MalformedZnodeError(path, "topic_id is not a string", data)
    replicas = _partition_map(path, obj.get("partitions"), "partitions", data)
    adding = _partition_map(path, obj.get("adding_replicas"), "adding_replicas", data)
    removing = _partition_map(path, obj.get("removing_replicas"), "removing_replicas", data)
    return TopicAssignment(
        topic_id=topic_id,
        partitions={
            p: ReplicaAssignment(r, adding.get(p, ()), removing.get(p, ())) for p, r in replicas.items()
        },
    )


# --- /brokers/topics/<topic>/partitions/<p>/state -----------------------------------------------


def encode_partition_state(leader_and_isr: LeaderAndIsr, controller_epoch: int) -> bytes:
    value: dict[str, Any] = {
        "controller_epoch": controller_epoch,
        "leader": leader_and_isr.leader,
        "version": 1,
        "leader_epoch": leader_and_isr.leader_epoch,
        "isr": list(leader_and_isr.isr),
    }
    if leader_and_isr.leader_recovery_state != LeaderRecoveryState.RECOVERED:
        value["leader_recovery_state"] = int(leader_and_isr.leader_recovery_state)
    return kafka_json(value)


def decode_partition_state(
    topic: str, partition: int, data: bytes | None, zk_version: int
) -> LeaderIsrAndControllerEpoch:
    path = partition_state_path(topic, partition)
    obj = parse_json_object(path, data)
    recovery = obj.get("leader_recovery_state", 0)
    try:
        recovery_state = LeaderRecoveryState(recovery)
    except ValueError:
        raise MalformedZnodeError(path, f"unknown leader_recovery_state {recovery!r}", data) from None
    leader_and_isr = LeaderAndIsr(
        leader=require(path, obj, "leader", int, data),
        leader_epoch=require(path, obj, "leader_epoch", int, data),
        isr=require_int_list(path, require(path, obj, "isr", list, data), "isr", data),
        leader_recovery_state=recovery_state,
        partition_epoch=zk_version,
    )
    return LeaderIsrAndControllerEpoch(leader_and_isr, require(path, obj, "controller_epoch", int, data))
