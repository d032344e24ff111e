"""Admin writes to ZooKeeper (Kafka's AdminZkClient): topic creation, partition increase, deletion
marks and dynamic config changes. They only write znodes; the controller reacts to the watches."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from coordination.errors import (
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import ReplicaAssignment, TopicAssignment, random_uuid_b64
from coordination.replica_assignment import (
    assign_replicas_to_brokers,
    assignment_for_new_partitions,
    validate_manual_assignment,
)
from coordination.zk_admin_data import config_change_entity_path

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(topic: str) -> None:
    """Kafka's Topic.validate, with its messages (clients print them)."""
    if not topic:
        reason = "the empty string is not allowed"
    elif topic in (".", ".."):
        reason = f"'{topic}' is not allowed"
    elif len(topic) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{topic}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not _LEGAL_TOPIC.match(topic):
        reason = f"'{topic}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return
    raise InvalidTopicError(f"Topic name is invalid: {reason}")


def _collision_key(topic: str) -> str:
    return topic.replace(".", "_")


@dataclass(frozen=True)
class NewTopic:
    """A CreateTopics entry: either counts (-1 = broker default) or an explicit assignment."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] | None = None


class AdminZkClient:
    def __init__(self, zk_client: KafkaZkClient) -> None:
        self.zk = zk_client

    def _broker_racks(self) -> list[tuple[int, str | None]]:
        return [(info.broker_id, info.rack) for info in self.zk.get_all_brokers().values()]

    def create_topic(
        self,
        topic: NewTopic,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Validate, assign replicas and (unless `validate_only`) write config then assignment."""
        validate_topic_name(topic.name)
        existing = self.zk.get_all_topics()
        if topic.name in existing:
            raise TopicExistsError(f"Topic '{topic.name}' already exists.")
        collisions = [t for t in existing if _collision_key(t) == _collision_key(topic.name)]
        if collisions:
            raise InvalidTopicError(f"Topic '{topic.name}' collides with existing topics: {', '.join(collisions)}")
        brokers = self._broker_racks()
        if topic.assignment is not None:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise InvalidConfigError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
                )
            assignment = {p: list(replicas) for p, replicas in topic.assignment.items()}
            validate_manual_assignment(assignment, {b for b, _ in brokers}, range(len(assignment)))
        else:
            partitions = default_partitions if topic.num_partitions == -1 else topic.num_partitions
            factor = default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
            if factor > len(brokers) and factor > 0:
                raise InvalidReplicationFactorError(
                    f"Replication factor: {factor} larger than available brokers: {len(brokers)}."
                )
            assignment = assign_replicas_to_brokers(brokers, partitions, factor)
        if not validate_only:
            config = {k: str(v) for k, v in (topic.configs or {}).items()}
            self.zk.set_or_create_entity_config("topics", topic.name, config)
            self.zk.create_topic_assignment(
                topic.name,
                TopicAssignment(
                    random_uuid_b64(), {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
                ),
            )
        return assignment

    def add_partitions(
        self,
        topic: str,
        new_count: int,
        assignment: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Grow a topic to `new_count` partitions (explicit replicas for the new ones, or Kafka's
        placement); only /brokers/topics/<topic> changes, the controller does the rest."""
        current, version = self.zk.get_topic_assignment(topic)
        if current is None:
            raise UnknownTopicError(f"The topic '{topic}' does not exist.")
        existing = {p: a.replicas for p, a in current.partitions.items()}
        brokers = self._broker_racks()
        if assignment is not None:
            added = {len(existing) + i: list(replicas) for i, replicas in enumerate(assignment)}
            if len(existing) + len(added) != new_count:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {new_count - len(existing)} but "
                    f"{len(added)} assignments provided."
                )
            validate_manual_assignment(added, {b for b, _ in brokers}, range(len(existing), new_count))
        else:
            added = assignment_for_new_partitions(brokers, existing, new_count)
        if not validate_only:
            partitions = dict(current.partitions)
            partitions.update({p: ReplicaAssignment(tuple(r)) for p, r in added.items()})
            self.zk.set_topic_assignment(topic, TopicAssignment(current.topic_id, partitions), version)
        return added

    def delete_topic(self, topic: str) -> None:
        """Mark for deletion (TopicAlreadyMarkedForDeletion is reported as success, like Kafka's
        DeleteTopics handler does)."""
        if topic not in self.zk.get_all_topics():
            raise UnknownTopicError("This server does not host this topic-partition.")
        self.zk.mark_topic_for_deletion(topic)

    def change_configs(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> None:
        """Replace an entity's dynamic config and tell every broker (version 2 notification)."""
        if entity_type == "topics" and entity_name not in self.zk.get_all_topics():
            raise UnknownTopicError(f"Topic {entity_name} does not exist.")
        self.zk.set_or_create_entity_config(entity_type, entity_name, {k: str(v) for k, v in config.items()})
        if not config and entity_type in ("users", "clients"):
            self.zk.delete_entity_config_if_unused(entity_type, entity_name)  # as Kafka cleans quota nodes
        self.zk.create_config_change_notification(config_change_entity_path(entity_type, entity_name))
