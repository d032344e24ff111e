"""Paths and value formats of config, admin-trigger, notification and producer-id znodes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from coordination.errors import MalformedZnodeError
from coordination.model import ProducerIdBlock, TopicPartition
from coordination.zk_data import (
    CONFIG_CHANGES_PATH,
    CONFIG_ENTITY_TYPES,
    CONFIG_PATH,
    FEATURE_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    REASSIGN_PARTITIONS_PATH,
    kafka_json,
    parse_json_object,
    require,
    require_int_list,
    require_long_string,
    require_version,
)

DEFAULT_ENTITY = "<default>"
CONFIG_CHANGE_PREFIX = "config_change_"
LOG_DIR_FAILURE_EVENT = 1
PRODUCER_ID_BLOCK_SIZE = 1000

# --- entity names (Kafka's Sanitizer) ------------------------------------------------------------

_UNRESERVED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """URL-encode an entity name for use in a znode path (`*` -> %2A, space -> %20)."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in name.encode("utf-8"))


def desanitize(name: str) -> str:
    return unquote_plus(name, encoding="utf-8", errors="strict")


def desanitize_entity(name: str) -> str:
    """An entity name from a znode path: desanitized, except the default entity ``<default>``."""
    return name if name == DEFAULT_ENTITY else desanitize(name)


# --- /config/<type>/<name> -----------------------------------------------------------------------


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """Path of an entity's config; `entity_name` is the raw name (or a nested `user/clients/id`
    path that is already sanitized when it contains '/')."""
    if entity_type not in CONFIG_ENTITY_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    name = entity_name if "/" in entity_name or entity_name == DEFAULT_ENTITY else sanitize(entity_name)
    return f"{CONFIG_PATH}/{entity_type}/{name}"


def encode_entity_config(config: dict[str, str]) -> bytes:
    return kafka_json({"version": 1, "config": {key: str(value) for key, value in config.items()}})


def decode_entity_config(path: str, data: bytes | None) -> dict[str, str]:
    """An entity's config overrides; a missing/empty node means no overrides."""
    if not data:
        return {}
    obj = parse_json_object(path, data)
    config = obj.get("config") or {}
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise MalformedZnodeError(path, "config is not an object of strings", data)
    return dict(config)


# --- /config/changes/config_change_<seq> ---------------------------------------------------------


@dataclass(frozen=True)
class ConfigChange:
    """`entity_path` is `<type>/<sanitized name>[/clients/<sanitized name>]`."""

    entity_path: str

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    @property
    def entity_name(self) -> str:
        return self.entity_path.split("/", 1)[1]


def config_change_entity_path(entity_type: str, entity_name: str) -> str:
    return config_entity_path(entity_type, entity_name)[len(CONFIG_PATH) + 1 :]


def encode_config_change(entity_path: str) -> bytes:
    return kafka_json({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes | None) -> ConfigChange:
    obj = parse_json_object(path, data)
    version = require_version(path, obj, range(1, 3), data)
    if version == 1:
        entity_type = require(path, obj, "entity_type", str, data)
        if entity_type not in ("topics", "clients"):
            raise MalformedZnodeError(path, f"version 1 does not allow entity_type {entity_type!r}", data)
        name = require(path, obj, "entity_name", str, data)
        return ConfigChange(f"{entity_type}/{sanitize(name)}")
    entity_path = require(path, obj, "entity_path", str, data)
    entity_type, _, name = entity_path.partition("/")
    if entity_type not in CONFIG_ENTITY_TYPES or not name:
        raise MalformedZnodeError(path, f"bad entity_path {entity_path!r}", data)
    return ConfigChange(entity_path)


CONFIG_CHANGE_PATH_PREFIX = f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"

# --- /admin/reassign_partitions and /admin/preferred_replica_election ---------------------------


def _partition_list(path: str, obj: dict[str, Any], data: bytes | None) -> list[dict[str, Any]]:
    entries = require(path, obj, "partitions", list, data)
    if not all(isinstance(entry, dict) for entry in entries):
        raise MalformedZnodeError(path, "partitions entries are not objects", data)
    return entries


def _topic_partition(path: str, entry: dict[str, Any], data: bytes | None) -> TopicPartition:
    return TopicPartition(
        require(path, entry, "topic", str, data), require(path, entry, "partition", int, data)
    )


def encode_reassignment(reassignment: dict[TopicPartition, tuple[int, ...]]) -> bytes:
    return kafka_json(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in reassignment.items()
            ],
        }
    )


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    path = REASSIGN_PARTITIONS_PATH
    obj = parse_json_object(path, data)
    require_version(path, obj, range(1, 2), data)
    return {
        _topic_partition(path, entry, data): require_int_list(
            path, require(path, entry, "replicas", list, data), "replicas", data
        )
        for entry in _partition_list(path, obj, data)
    }


def encode_partition_set(partitions: list[TopicPartition] | set[TopicPartition]) -> bytes:
    """The value of /admin/preferred_replica_election and of ISR change notifications."""
    return kafka_json(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
        }
    )


def decode_partition_set(path: str, data: bytes | None) -> set[TopicPartition]:
    obj = parse_json_object(path, data)
    require_version(path, obj, range(1, 2), data)
    return {_topic_partition(path, entry, data) for entry in _partition_list(path, obj, data)}


def decode_preferred_replica_election(data: bytes | None) -> set[TopicPartition]:
    return decode_partition_set(PREFERRED_REPLICA_ELECTION_PATH, data)


# --- /log_dir_event_notification/log_dir_event_<seq> --------------------------------------------


def encode_log_dir_event(broker_id: int) -> bytes:
    return kafka_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(path: str, data: bytes | None) -> int:
    """The broker id whose log dir failed."""
    obj = parse_json_object(path, data)
    require_version(path, obj, range(1, 2), data)
    if require(path, obj, "event", int, data) != LOG_DIR_FAILURE_EVENT:
        raise MalformedZnodeError(path, "unknown log dir event", data)
    return require(path, obj, "broker", int, data)


# --- /latest_producer_id_block -------------------------------------------------------------------


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return kafka_json(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.first_producer_id),
            "block_end": str(block.last_producer_id),
        }
    )


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    """The last block handed out, or None when the node is empty (the first block starts at 0)."""
    if not data:
        return None
    path = PRODUCER_ID_BLOCK_PATH
    obj = parse_json_object(path, data)
    require_version(path, obj, range(1, 2), data)
    start = require_long_string(path, obj, "block_start", data)
    end = require_long_string(path, obj, "block_end", data)
    if end < start:
        raise MalformedZnodeError(path, "block_end is before block_start", data)
    return ProducerIdBlock(require(path, obj, "broker", int, data), start, end - start + 1)


# --- /feature ------------------------------------------------------------------------------------

FEATURE_ZNODE_VERSION = 2
FEATURE_STATUS_ENABLED = 1


def encode_feature_znode(features: dict[str, int]) -> bytes:
    return kafka_json(
        {
            "version": FEATURE_ZNODE_VERSION,
            "status": FEATURE_STATUS_ENABLED,
            "features": {name: {"max_version_level": level} for name, level in features.items()},
        }
    )


def decode_feature_znode(data: bytes | None) -> tuple[int, dict[str, int]]:
    """(status, finalized max version level per feature)."""
    path = FEATURE_PATH
    obj = parse_json_object(path, data)
    require_version(path, obj, range(1, FEATURE_ZNODE_VERSION + 1), data)
    status = require(path, obj, "status", int, data)
    features = obj.get("features") or {}
    if not isinstance(features, dict):
        raise MalformedZnodeError(path, "features is not an object", data)
    levels = {}
    for name, entry in features.items():
        if not isinstance(entry, dict):
            raise MalformedZnodeError(path, f"feature {name!r} is not an object", data)
        levels[name] = require(path, entry, "max_version_level", int, data)
    return status, levels
