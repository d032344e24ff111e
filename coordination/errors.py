"""Typed errors of the ZooKeeper coordination layer.

Each carries the Kafka error name a request handler should answer with (`kafka_error`), so that the
broker can map them to `protocol.errors.Errors` without knowing ZooKeeper.
"""
from __future__ import annotations


class CoordinationError(Exception):
    """Base class; `kafka_error` is the name of the Kafka error code to report to clients."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class MalformedZnodeError(CoordinationError):
    """A znode holds a value Kafka could not have written (bad JSON, missing field, unknown version)."""

    def __init__(self, path: str, reason: str, data: bytes | None = None) -> None:
        preview = "" if data is None else f": {data[:200]!r}"
        super().__init__(f"malformed value of znode {path} ({reason}){preview}")
        self.path = path
        self.reason = reason


class ZooKeeperUnavailableError(CoordinationError):
    """ZooKeeper can't be reached (connection timeout, no session)."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class ControllerMovedError(CoordinationError):
    """A controller write was fenced: another broker became controller (or this one lost its session)."""

    kafka_error = "NOT_CONTROLLER"


class NotControllerError(CoordinationError):
    """A controller-only request reached a broker that is not the active controller."""

    kafka_error = "NOT_CONTROLLER"


class BrokerIdInUseError(CoordinationError):
    """Another live broker (another ZooKeeper session) is registered with this broker id."""


class InconsistentClusterIdError(CoordinationError):
    """The cluster id in ZooKeeper differs from the one in a log dir's meta.properties."""

    kafka_error = "INCONSISTENT_CLUSTER_ID"


class TopicExistsError(CoordinationError):
    kafka_error = "TOPIC_ALREADY_EXISTS"


class UnknownTopicError(CoordinationError):
    kafka_error = "UNKNOWN_TOPIC_OR_PARTITION"


class TopicDeletionDisabledError(CoordinationError):
    kafka_error = "TOPIC_DELETION_DISABLED"


class InvalidTopicError(CoordinationError):
    kafka_error = "INVALID_TOPIC_EXCEPTION"


class InvalidPartitionsError(CoordinationError):
    kafka_error = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(CoordinationError):
    kafka_error = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(CoordinationError):
    kafka_error = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(CoordinationError):
    kafka_error = "INVALID_CONFIG"


class StaleBrokerEpochError(CoordinationError):
    kafka_error = "STALE_BROKER_EPOCH"


class BrokerIdNotRegisteredError(CoordinationError):
    kafka_error = "BROKER_ID_NOT_REGISTERED"


class ProducerIdsExhaustedError(CoordinationError):
    """The 64-bit producer id space is used up (Kafka: UNKNOWN_SERVER_ERROR)."""
