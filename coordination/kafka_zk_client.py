"""Typed reads and writes of every znode a ZooKeeper-mode Kafka broker and controller use
(Kafka's KafkaZkClient role).

Controller writes take `epoch_zk_version`, the zkVersion of /controller_epoch the controller got
when it won the election: each is a multi whose first op checks that version, so a controller
that has been replaced can't write (ControllerMovedError).
"""
from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable
import ssl
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError
from kazoo.security import ACL

from coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    MalformedZnodeError,
    TopicExistsError,
    UnknownTopicError,
)
from coordination.model import (
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlock,
    TopicAssignment,
    TopicPartition,
)
from coordination.zk_admin_data import (
    CONFIG_CHANGE_PATH_PREFIX,
    FEATURE_STATUS_ENABLED,
    config_entity_path,
    decode_entity_config,
    decode_feature_znode,
    decode_producer_id_block,
    desanitize_entity,
    encode_config_change,
    encode_entity_config,
    encode_feature_znode,
    encode_log_dir_event,
    encode_producer_id_block,
)
from coordination.zk_client import ZooKeeperClient
from coordination.zk_data import (
    BROKER_IDS_PATH,
    BROKER_SEQ_ID_PATH,
    CLUSTER_ID_PATH,
    CONFIG_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    FEATURE_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PERSISTENT_PATHS,
    PRODUCER_ID_BLOCK_PATH,
    TOPICS_PATH,
    broker_id_path,
    decode_broker_info,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic_assignment,
    delete_topic_path,
    encode_broker_info,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic_assignment,
    partition_state_path,
    topic_partition_path,
    topic_partitions_path,
    topic_path,
)

log = logging.getLogger(__name__)

INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


def _create(path: str, data: bytes, acl: list[ACL], transaction: Any) -> None:
    transaction.create(path, data, acl)


def _set_data(path: str, data: bytes, version: int, transaction: Any) -> None:
    transaction.set_data(path, data, version)


@dataclass
class UpdateLeaderAndIsrResult:
    """Outcome of conditional partition-state writes: `finished` maps each partition to its new
    state (with the new partition epoch) or the error; `to_retry` lost a zkVersion race."""

    finished: dict[TopicPartition, LeaderAndIsr | Exception] = field(default_factory=dict)
    to_retry: list[TopicPartition] = field(default_factory=list)


class KafkaZkClient:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk

    @classmethod
    def connect(
        cls,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        name: str = "kafka",
        max_in_flight_requests: int = 10,
        ssl_context: ssl.SSLContext | None = None,
        sasl_options: dict[str, str] | None = None,
        secure_acls: bool = False,
    ) -> KafkaZkClient:
        """Connect to `zookeeper.connect` (chroot created when missing; over TLS with
        ``ssl_context``, authenticated with ``sasl_options``, nodes created with Kafka's secure
        ACLs when ``secure_acls``) and return the client."""
        zk = ZooKeeperClient(connect, session_timeout_ms, connection_timeout_ms, name, max_in_flight_requests,
                             ssl_context, sasl_options, secure_acls)
        zk.start()
        return cls(zk)

    def close(self) -> None:
        self.zk.close()

    def create_top_level_paths(self) -> None:
        for path in PERSISTENT_PATHS:
            self.zk.ensure_persistent_path(path)

    # --- controller-fenced writes ----------------------------------------------------------------

    def _fenced_multi(self, epoch_zk_version: int, build: Callable[[Any], None]) -> list[Any]:
        """Run `build`'s ops after a check of /controller_epoch's zkVersion; returns the results
        of `build`'s ops (exceptions included) or raises ControllerMovedError."""
        return self._fenced_multi_many(epoch_zk_version, [build])[0]

    def _fenced_multi_many(self, epoch_zk_version: int, builds: list[Callable[[Any], None]]) -> list[list[Any]]:
        """``_fenced_multi`` of many transactions in one pipeline (ZooKeeperClient.multi_many)."""

        def with_check(build: Callable[[Any], None], transaction: Any) -> None:
            transaction.check(CONTROLLER_EPOCH_PATH, epoch_zk_version)
            build(transaction)

        outcomes = self.zk.multi_many([functools.partial(with_check, build) for build in builds])
        for results in outcomes:
            if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
                raise ControllerMovedError(
                    f"controller epoch zkVersion is no longer {epoch_zk_version}: another broker is controller"
                )
        return [results[1:] for results in outcomes]

    @staticmethod
    def _raise_first_error(results: list[Any]) -> list[Any]:
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result
        return results

    def _fenced_delete_recursive(self, path: str, epoch_zk_version: int) -> None:
        for child in self.zk.get_children(path):
            self._fenced_delete_recursive(f"{path}/{child}", epoch_zk_version)
        results = self._fenced_multi(epoch_zk_version, lambda t: t.delete(path))
        error = results[0]
        if isinstance(error, NotEmptyError):
            self._fenced_delete_recursive(path, epoch_zk_version)  # a child appeared meanwhile
        elif isinstance(error, Exception) and not isinstance(error, NoNodeError):
            raise error

    # --- /cluster/id ------------------------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        data, stat = self.zk.get_data(CLUSTER_ID_PATH)
        return None if stat is None else decode_cluster_id(data)

    def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """Create /cluster/id with `proposed_cluster_id` unless it exists; return the stored id."""
        try:
            self.zk.create_recursive(CLUSTER_ID_PATH, encode_cluster_id(proposed_cluster_id))
            return proposed_cluster_id
        except NodeExistsError:
            cluster_id = self.get_cluster_id()
            if cluster_id is None:  # deleted in between: try again
                return self.create_or_get_cluster_id(proposed_cluster_id)
            return cluster_id

    # --- /brokers/ids -----------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral registration; returns the broker epoch (the node's czxid)."""
        path = broker_id_path(info.broker_id)
        data = encode_broker_info(info)

        def build(transaction: Any) -> None:
            # Kafka creates it with null data; kazoo's multi can only send empty data.
            transaction.create(path, b"", self.zk.acls(path), ephemeral=True)
            transaction.set_data(path, data, 0)

        while True:
            results = self.zk.multi(build)
            if not isinstance(results[0], Exception):
                return results[1].czxid
            if not isinstance(results[0], NodeExistsError):
                self._raise_first_error(results)
            existing, stat = self.zk.get_data(path)
            if stat is None:
                continue  # the old registration expired meanwhile
            if stat.ephemeralOwner != self.zk.session_id:
                raise BrokerIdInUseError(
                    f"broker id {info.broker_id} is already registered at {path} by another live "
                    f"broker (ZooKeeper session 0x{stat.ephemeralOwner:x}); this broker cannot start "
                    f"until that broker stops or its session expires. Registered as: {existing!r}"
                )
            # Our own node from before a quick reconnect: take it over.
            if existing != data:
                self.zk.set_data(path, data, stat.version)
            return stat.czxid

    def generate_broker_id(self, reserved_broker_max_id: int = 1000) -> int:
        """broker.id.generation.enable: bump /brokers/seqid's zkVersion; id = version + reserved max."""
        try:
            stat = self.zk.set_data(BROKER_SEQ_ID_PATH, b"", -1)
        except NoNodeError:
            self.zk.ensure_persistent_path(BROKER_SEQ_ID_PATH)
            stat = self.zk.set_data(BROKER_SEQ_ID_PATH, b"", -1)
        return stat.version + reserved_broker_max_id

    def get_broker_ids(self, watch: bool = False) -> list[int]:
        ids = []
        for child in self.zk.get_children(BROKER_IDS_PATH, watch):
            try:
                ids.append(int(child))
            except ValueError:
                log.error("ignoring znode %s/%s: not a broker id", BROKER_IDS_PATH, child)
        return sorted(ids)

    def get_broker_info(self, broker_id: int, watch: bool = False) -> BrokerInfo | None:
        data, stat = self.zk.get_data(broker_id_path(broker_id), watch)
        return None if stat is None else decode_broker_info(broker_id, data, stat.czxid)

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers; malformed registrations are logged and left out."""
        brokers = {}
        for broker_id in self.get_broker_ids():
            try:
                info = self.get_broker_info(broker_id)
            except MalformedZnodeError as exc:
                log.error("ignoring broker %d: %s", broker_id, exc)
                continue
            if info is not None:
                brokers[broker_id] = info
        return brokers

    # --- /controller and /controller_epoch ---------------------------------------------------------

    def get_controller_id(self, watch: bool = False) -> int | None:
        data, stat = self.zk.get_data(CONTROLLER_PATH, watch)
        return None if stat is None else decode_controller(data)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion of /controller_epoch), or None before the first election."""
        data, stat = self.zk.get_data(CONTROLLER_EPOCH_PATH)
        return None if stat is None else (decode_controller_epoch(data), stat.version)

    def _create_or_get_controller_epoch(self) -> tuple[int, int]:
        try:
            self.zk.create_recursive(CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
            return INITIAL_CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExistsError:
            current = self.get_controller_epoch()
            if current is None:
                return self._create_or_get_controller_epoch()
            return current

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Try to become controller: one multi creates the ephemeral /controller and bumps
        /controller_epoch conditionally. Returns (new epoch, its zkVersion); raises
        ControllerMovedError when another broker won."""
        epoch, epoch_zk_version = self._create_or_get_controller_epoch()
        new_epoch = epoch + 1
        controller_data = encode_controller(broker_id, int(time.time() * 1000))

        def build(transaction: Any) -> None:
            transaction.create(CONTROLLER_PATH, controller_data, self.zk.acls(CONTROLLER_PATH), ephemeral=True)
            transaction.set_data(CONTROLLER_EPOCH_PATH, encode_controller_epoch(new_epoch), epoch_zk_version)

        results = self.zk.multi(build)
        if not isinstance(results[0], Exception) and not isinstance(results[1], Exception):
            return new_epoch, results[1].version
        if not any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
            self._raise_first_error(results)
        # We may have won through an earlier attempt (connection loss and retry): re-read both.
        if self.get_controller_id() == broker_id:
            current = self.get_controller_epoch()
            if current is not None and current[0] == new_epoch:
                return current
        raise ControllerMovedError("another broker became controller; aborting controller startup")

    def delete_controller(self, epoch_zk_version: int) -> None:
        """Give up /controller (fenced, so only the controller of that epoch can)."""
        self.delete_fenced(CONTROLLER_PATH, epoch_zk_version)

    # --- /brokers/topics --------------------------------------------------------------------------

    def get_all_topics(self, watch: bool = False) -> set[str]:
        return set(self.zk.get_children(TOPICS_PATH, watch))

    def get_topic_assignments(self, topics: list[str], watch: bool = False
                              ) -> dict[str, TopicAssignment | MalformedZnodeError | None]:
        """Many topics' assignments in one pipeline (the controller's start): None for a topic that
        does not exist, the error for one whose znode cannot be read."""
        out: dict[str, TopicAssignment | MalformedZnodeError | None] = {}
        for topic, (data, stat) in zip(topics, self.zk.get_data_many([topic_path(t) for t in topics], watch)):
            try:
                out[topic] = None if stat is None else decode_topic_assignment(topic, data)
            except MalformedZnodeError as exc:
                out[topic] = exc
        return out

    def get_topic_assignment(self, topic: str, watch: bool = False) -> tuple[TopicAssignment | None, int]:
        """(assignment, zkVersion); (None, -1) if the topic does not exist."""
        data, stat = self.zk.get_data(topic_path(topic), watch)
        if stat is None:
            return None, -1
        return decode_topic_assignment(topic, data), stat.version

    def create_topic_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        try:
            self.zk.create_recursive(topic_path(topic), encode_topic_assignment(assignment))
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment, expected_version: int = -1) -> int:
        """Admin-side rewrite (partition increase); returns the new zkVersion."""
        try:
            return self.zk.set_data(topic_path(topic), encode_topic_assignment(assignment), expected_version).version
        except NoNodeError:
            raise UnknownTopicError(f"Topic {topic} does not exist.") from None

    def set_topic_assignment_fenced(self, topic: str, assignment: TopicAssignment, epoch_zk_version: int) -> None:
        """Controller-side rewrite (topic id, reassignment)."""
        data = encode_topic_assignment(assignment)
        self._raise_first_error(self._fenced_multi(epoch_zk_version, lambda t: t.set_data(topic_path(topic), data)))

    # --- partition states -------------------------------------------------------------------------

    def create_partition_states(
        self,
        states: dict[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Create `partitions/<p>/state` for new partitions (parents created as needed)."""
        for topic in {tp.topic for tp in states}:
            self.zk.ensure_persistent_path(topic_partitions_path(topic))
        client = self.zk.kazoo  # each partition's node (null data, as Kafka's), pipelined; existing ones are fine
        for result in self.zk.call_many(
                [functools.partial(client.create_async, topic_partition_path(*tp), None,
                                   self.zk.acls(topic_partition_path(*tp))) for tp in states]):
            if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
                raise result
        writes = self._fenced_multi_many(epoch_zk_version, [
            functools.partial(_create, partition_state_path(*tp), encode_partition_state(state, controller_epoch),
                              self.zk.acls(partition_state_path(*tp)))
            for tp, state in states.items()])
        return {tp: results[0] if isinstance(results[0], Exception) else state.with_partition_epoch(0)
                for (tp, state), results in zip(states.items(), writes)}

    def update_leader_and_isr(
        self,
        states: dict[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Conditional writes of partition states on their partition epoch (zkVersion)."""
        result = UpdateLeaderAndIsrResult()
        writes = self._fenced_multi_many(epoch_zk_version, [
            functools.partial(_set_data, partition_state_path(*tp), encode_partition_state(state, controller_epoch),
                              state.partition_epoch)
            for tp, state in states.items()])
        for (tp, state), results in zip(states.items(), writes):
            if isinstance(results[0], BadVersionError):
                result.to_retry.append(tp)
            elif isinstance(results[0], Exception):
                result.finished[tp] = results[0]
            else:
                result.finished[tp] = state.with_partition_epoch(results[0].version)
        return result

    def get_partition_states(
        self, partitions: Iterable[TopicPartition], watch: bool = False
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """States of the partitions that have one; malformed ones are logged and left out."""
        partitions = list(partitions)
        found = self.zk.get_data_many([partition_state_path(*tp) for tp in partitions], watch)
        states = {}
        for tp, (data, stat) in zip(partitions, found):
            if stat is None:
                continue
            try:
                states[tp] = decode_partition_state(tp.topic, tp.partition, data, stat.version)
            except MalformedZnodeError as exc:
                log.error("ignoring partition state of %s: %s", tp, exc)
        return states

    # --- topic deletion ---------------------------------------------------------------------------

    def get_topic_deletions(self, watch: bool = False) -> set[str]:
        return set(self.zk.get_children(DELETE_TOPICS_PATH, watch))

    def mark_topic_for_deletion(self, topic: str) -> bool:
        """False if the topic was already marked."""
        try:
            self.zk.create_recursive(delete_topic_path(topic), None)
            return True
        except NodeExistsError:
            return False

    def delete_topic_deletion_marker(self, topic: str, epoch_zk_version: int) -> None:
        self._fenced_multi(epoch_zk_version, lambda t: t.delete(delete_topic_path(topic)))

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Remove /brokers/topics/<topic> (recursively) and /config/topics/<topic>."""
        self._fenced_delete_recursive(topic_path(topic), epoch_zk_version)
        self._fenced_delete_recursive(config_entity_path("topics", topic), epoch_zk_version)

    def delete_fenced(self, path: str, epoch_zk_version: int) -> None:
        """Delete one controller-owned node (admin triggers, notifications); a missing node is fine."""
        results = self._fenced_multi(epoch_zk_version, lambda t: t.delete(path))
        if isinstance(results[0], Exception) and not isinstance(results[0], NoNodeError):
            raise results[0]

    def get_data(self, path: str, watch: bool = False) -> tuple[bytes | None, int]:
        """Raw data and zkVersion of any node ((None, -1) if missing); for admin-trigger nodes."""
        data, stat = self.zk.get_data(path, watch)
        return (None, -1) if stat is None else (data, stat.version)

    def get_children(self, path: str, watch: bool = False) -> list[str]:
        return sorted(self.zk.get_children(path, watch))

    # --- dynamic configs --------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        path = config_entity_path(entity_type, entity_name)
        data, _ = self.zk.get_data(path)
        return decode_entity_config(path, data)

    def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of a type -> its config, names desanitized (AdminZkClient.fetchAllEntityConfigs)."""
        parent = f"{CONFIG_PATH}/{entity_type}"
        return {desanitize_entity(name): self._config_at(f"{parent}/{name}") for name in self.get_children(parent)}

    def get_all_user_client_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        """``/config/users/<user>/clients/<client-id>`` -> config, names desanitized."""
        result: dict[tuple[str, str], dict[str, str]] = {}
        for user in self.get_children(f"{CONFIG_PATH}/users"):
            parent = f"{CONFIG_PATH}/users/{user}/clients"
            for client in self.get_children(parent):
                result[(desanitize_entity(user), desanitize_entity(client))] = self._config_at(f"{parent}/{client}")
        return result

    def delete_entity_config_if_unused(self, entity_type: str, entity_name: str) -> None:
        """Remove an entity's config znode that holds nothing and has no children (user/client nodes)."""
        path = config_entity_path(entity_type, entity_name)
        data, _ = self.zk.get_data(path)
        if not decode_entity_config(path, data) and not self.zk.get_children(path):
            try:
                self.zk.delete(path)
            except (NoNodeError, NotEmptyError):
                pass

    def _config_at(self, path: str) -> dict[str, str]:
        data, _ = self.zk.get_data(path)
        return decode_entity_config(path, data)

    def set_or_create_entity_config(self, entity_type: str, entity_name: str, config: dict[str, str]) -> None:
        path = config_entity_path(entity_type, entity_name)
        data = encode_entity_config(config)
        try:
            self.zk.set_data(path, data)
        except NoNodeError:
            try:
                self.zk.create_recursive(path, data)
            except NodeExistsError:
                self.zk.set_data(path, data)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """Tell the controller that a log dir of ``broker_id`` failed (a sequential notification znode)."""
        return self.zk.create_recursive(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/log_dir_event_",
                                        encode_log_dir_event(broker_id), sequence=True)

    def create_config_change_notification(self, entity_path: str) -> str:
        return self.zk.create_recursive(CONFIG_CHANGE_PATH_PREFIX, encode_config_change(entity_path), sequence=True)

    # --- producer ids and features ----------------------------------------------------------------

    def get_producer_id_block(self) -> tuple[ProducerIdBlock | None, int]:
        """(last block handed out or None, zkVersion of the node; -1 if it is missing)."""
        data, stat = self.zk.get_data(PRODUCER_ID_BLOCK_PATH)
        if stat is None:
            return None, -1
        return decode_producer_id_block(data), stat.version

    def conditional_set_producer_id_block(self, block: ProducerIdBlock, expected_version: int) -> bool:
        """Write the next block if the node is still at `expected_version` (-1: create it)."""
        data = encode_producer_id_block(block)
        try:
            if expected_version < 0:
                self.zk.create_recursive(PRODUCER_ID_BLOCK_PATH, data)
            else:
                self.zk.set_data(PRODUCER_ID_BLOCK_PATH, data, expected_version)
            return True
        except (BadVersionError, NodeExistsError):
            return False

    def ensure_feature_znode(self) -> None:
        """Kafka's enableFeatureVersioning: /feature at version 2 and enabled, its finalized features
        kept (none when it was disabled, or absent); rewritten only when that changes its content,
        so that its zkVersion (the finalized features epoch) stays as it was."""
        current, stat = self.zk.get_data(FEATURE_PATH)
        if stat is None:
            try:
                self.zk.create_recursive(FEATURE_PATH, encode_feature_znode({}))
            except NodeExistsError:
                pass
            return
        try:
            status, features = decode_feature_znode(current)
            existing = json.loads(current or b"{}")
        except MalformedZnodeError as exc:
            log.error("rewriting /feature: %s", exc)
            status, features, existing = FEATURE_STATUS_ENABLED, {}, None
        wanted = encode_feature_znode(features if status == FEATURE_STATUS_ENABLED else {})
        if existing != json.loads(wanted):
            self.zk.set_data(FEATURE_PATH, wanted, stat.version)

