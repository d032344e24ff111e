"""KafkaController: election through /controller, then (while active) cluster management driven by
ZooKeeper watches, all processed one event at a time on the controller event thread.

Every broker runs one. Request handlers of the broker call the public methods; those that change
controller state return a concurrent.futures.Future completed by the event thread (wrap it with
asyncio.wrap_future on an event loop).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from coordination.admin_zk_client import AdminZkClient, NewTopic
from coordination.blocking_rpc import Connector, plain_connect
from coordination.controller import controller_events
from coordination.controller.channel_manager import ControllerChannelManager
from coordination.controller.context import ControllerContext
from coordination.controller.controller_metrics import CONTROLLER_STATES, IDLE, ControllerMetrics
from coordination.controller.event_manager import ControllerEvent, ControllerEventManager
from coordination.controller.feature_updates import FeatureUpdate
from coordination.controller.partition_state_machine import PartitionStateMachine
from coordination.controller.reassignment import ReassignmentManager
from coordination.controller.replica_state_machine import ReplicaStateMachine
from coordination.controller.request_batch import ControllerBrokerRequestBatch
from coordination.controller.states import PartitionState, ReplicaState
from coordination.controller.topic_deletion import TopicDeletionManager
from coordination.errors import (
    BrokerIdNotRegisteredError,
    ControllerMovedError,
    CoordinationError,
    InvalidTopicError,
    MalformedZnodeError,
    NotControllerError,
    StaleBrokerEpochError,
    TopicDeletionDisabledError,
)
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import ProducerIdBlock, TopicPartition, random_uuid_b64
from coordination.producer_id_manager import allocate_producer_id_block
from coordination.zk_data import (
    BROKER_IDS_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    TOPICS_PATH,
    broker_id_path,
    topic_path,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerConfig:
    """The broker settings the controller reads (Kafka names in comments)."""

    delete_topic_enable: bool = True  # delete.topic.enable
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable (broker default)
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage
    leader_imbalance_check_interval_seconds: float = 300  # leader.imbalance.check.interval.seconds
    inter_broker_listener_name: str = "PLAINTEXT"  # inter.broker.listener.name
    controller_socket_timeout_ms: int = 30000  # controller.socket.timeout.ms
    # Opens connections to brokers over the inter-broker listener (TLS and SASL as it needs).
    connect: Connector = plain_connect


ChannelManagerFactory = Callable[[int, ControllerConfig], ControllerChannelManager]


def default_channel_manager(controller_id: int, config: ControllerConfig) -> ControllerChannelManager:
    return ControllerChannelManager(
        controller_id, config.inter_broker_listener_name, config.controller_socket_timeout_ms,
        connect=config.connect,
    )


class KafkaController:
    def __init__(
        self,
        zk_client: KafkaZkClient,
        broker_id: int,
        config: ControllerConfig | None = None,
        channel_manager_factory: ChannelManagerFactory = default_channel_manager,
    ) -> None:
        self.zk = zk_client
        self.broker_id = broker_id
        self.config = config or ControllerConfig()
        self._channel_factory = channel_manager_factory
        self.context = ControllerContext()
        self.metrics = ControllerMetrics()
        self.channel: ControllerChannelManager | None = None
        self._events = ControllerEventManager(self._process, name=f"controller-{broker_id}-event-thread")
        self._state_lock = threading.Lock()
        self._active = False
        self.active_controller_id = -1
        self._rebalance_timer: threading.Timer | None = None
        self.reassignment: ReassignmentManager | None = None
        self._session_handler_name = f"controller-{broker_id}"
        self._handlers = controller_events.handlers(self)

    # --- lifecycle ---------------------------------------------------------------------------------

    def startup(self) -> None:
        self.zk.zk.register_session_handler(self._session_handler_name, self)
        self.zk.zk.register_znode_handler(CONTROLLER_PATH, lambda _path: self.enqueue("controller_change"))
        self._events.start()
        self.enqueue("startup")

    def shutdown(self) -> None:
        self.zk.zk.unregister_session_handler(self._session_handler_name)
        self.zk.zk.unregister_znode_handler(CONTROLLER_PATH)
        done = self.enqueue("resign")
        try:
            done.result(10)
        except Exception:
            log.exception("controller %d did not resign cleanly", self.broker_id)
        self._events.close()

    @property
    def is_active(self) -> bool:
        with self._state_lock:
            return self._active

    @property
    def epoch(self) -> int:
        return self.context.epoch

    def enqueue(self, name: str, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._events.put(ControllerEvent(name, args, future))
        return future

    @property
    def event_manager(self) -> ControllerEventManager:
        return self._events

    # SessionHandler (called by the ZooKeeper client's state thread)
    def on_session_expired(self) -> None:
        # Stop acting at once: refuse requests, drop queued work and resign before anything else.
        with self._state_lock:
            self._active = False
        self._events.clear_and_put(ControllerEvent("expire", (), Future()))

    def on_new_session(self) -> None:
        self.enqueue("register_and_reelect")

    def _process(self, event: ControllerEvent) -> Any:
        handler = self._handlers[event.name]
        start = time.monotonic()
        state = self.metrics.state = CONTROLLER_STATES.get(event.name, IDLE)
        try:
            return handler(*event.args)
        except ControllerMovedError:
            log.warning("controller %d was fenced while handling %s; resigning", self.broker_id, event.name)
            self.resign()
            self.elect()
            raise NotControllerError(f"broker {self.broker_id} is no longer the controller") from None
        finally:
            self.metrics.state = IDLE
            self.metrics.event_processed(state, (time.monotonic() - start) * 1000)
            if self._events.idle:
                self.metrics.update(self.context, self.is_active)

    def require_active(self) -> None:
        if not self.is_active:
            raise NotControllerError(
                f"broker {self.broker_id} is not the controller (controller is {self.active_controller_id})"
            )

    # --- election ----------------------------------------------------------------------------------

    def elect(self) -> None:
        active = self._read_controller_id()
        if active is not None:
            self.active_controller_id = active
            if active != self.broker_id and self.is_active:
                self.resign()
            return
        try:
            epoch, epoch_zk_version = self.zk.register_controller_and_increment_epoch(self.broker_id)
        except ControllerMovedError:
            active = self._read_controller_id()
            self.active_controller_id = -1 if active is None else active
            log.info("broker %d lost the controller election to %s", self.broker_id, active)
            return
        self.context.epoch, self.context.epoch_zk_version = epoch, epoch_zk_version
        self.active_controller_id = self.broker_id
        log.info("broker %d is the controller with epoch %d", self.broker_id, epoch)
        try:
            self.on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            # Let another broker try (Kafka's triggerControllerMove).
            log.exception("controller %d failed to take over; resigning", self.broker_id)
            self.resign()
            self.zk.delete_controller(epoch_zk_version)
            raise

    def _read_controller_id(self) -> int | None:
        try:
            return self.zk.get_controller_id(watch=True)
        except MalformedZnodeError as exc:
            log.error("ignoring %s", exc)
            return -1

    def on_controller_failover(self) -> None:
        zk = self.zk.zk
        zk.register_child_handler(BROKER_IDS_PATH, lambda _p: self.enqueue("broker_change"))
        zk.register_child_handler(TOPICS_PATH, lambda _p: self.enqueue("topic_change"))
        zk.register_child_handler(DELETE_TOPICS_PATH, lambda _p: self.enqueue("topic_deletion"))
        zk.register_child_handler(ISR_CHANGE_NOTIFICATION_PATH, lambda _p: self.enqueue("isr_change_notification"))
        zk.register_child_handler(
            LOG_DIR_EVENT_NOTIFICATION_PATH, lambda _p: self.enqueue("log_dir_event_notification")
        )
        zk.register_znode_handler(PREFERRED_REPLICA_ELECTION_PATH, lambda _p: self.enqueue("preferred_replica_election"))
        self.zk.ensure_feature_znode()
        self._initialize_context()
        self.channel = self._channel_factory(self.broker_id, self.config)
        self.channel.startup(list(self.context.live_brokers.values()))
        self.batch = ControllerBrokerRequestBatch(self.context, self.channel, self.broker_id)
        self.batch.stop_replica_callback = lambda broker, errors: self.enqueue("stop_replica_response", broker, errors)
        self.batch.leader_and_isr_callback = lambda broker, errors: self.enqueue(
            "leader_and_isr_response", broker, errors
        )
        self.replica_sm = ReplicaStateMachine(self.context, self.zk, self.batch)
        self.partition_sm = PartitionStateMachine(self.context, self.zk, self.batch, self.unclean_enabled,
                                                 self.metrics)
        self.deletion = TopicDeletionManager(
            self.context, self.zk, self.replica_sm, self.partition_sm, self.batch,
            self.config.delete_topic_enable, self.forget_topic,
        )
        with self._state_lock:
            self._active = True
        self.batch.add_update_metadata(self.context.live_broker_ids, self.context.all_partitions())
        self.batch.send()
        self.replica_sm.startup()
        self.partition_sm.startup()
        self.reassignment = ReassignmentManager(self)
        self.reassignment.start()
        self._handlers["topic_deletion"]()
        self._handlers["preferred_replica_election"]()
        self._handlers["isr_change_notification"]()
        self._handlers["log_dir_event_notification"]()
        self._schedule_rebalance()

    def _initialize_context(self) -> None:
        self.context.live_brokers = {}
        for broker_id in self.zk.get_broker_ids(watch=True):
            self.watch_broker(broker_id)
            info = self.read_broker(broker_id)
            if info is not None:
                self.context.live_brokers[broker_id] = info
        self.context.all_topics = self.zk.get_all_topics(watch=True)
        self.refresh_topics(sorted(self.context.all_topics))
        self.context.leadership = self.zk.get_partition_states(self.context.all_partitions())

    def watch_broker(self, broker_id: int) -> None:
        self.zk.zk.register_znode_handler(
            broker_id_path(broker_id), lambda _p, b=broker_id: self.enqueue("broker_modification", b)
        )

    def read_broker(self, broker_id: int) -> Any:
        try:
            return self.zk.get_broker_info(broker_id, watch=True)
        except MalformedZnodeError as exc:
            log.error("ignoring broker registration: %s", exc)
            return None

    def refresh_topic(self, topic: str) -> list[TopicPartition]:
        """Re-read a topic's assignment (watching it); returns partitions new to the context."""
        return self.refresh_topics([topic])

    def refresh_topics(self, topics: list[str]) -> list[TopicPartition]:
        """``refresh_topic`` of many topics, their assignments read in one ZooKeeper pipeline."""
        for topic in topics:
            self.zk.zk.register_znode_handler(topic_path(topic),
                                              lambda _p, t=topic: self.enqueue("partition_modification", t))
        added: list[TopicPartition] = []
        for topic, assignment in self.zk.get_topic_assignments(topics, watch=True).items():
            if isinstance(assignment, MalformedZnodeError):
                log.error("ignoring topic %s until its znode is fixed: %s", topic, assignment)
                continue
            if assignment is None:
                continue
            if assignment.topic_id is None:
                assignment = replace(assignment, topic_id=random_uuid_b64())
                self.zk.set_topic_assignment_fenced(topic, assignment, self.context.epoch_zk_version)
            self.context.topic_ids[topic] = assignment.topic_id
            known = self.context.assignments.get(topic, {})
            added += [TopicPartition(topic, p) for p in sorted(assignment.partitions) if p not in known]
            for p, replicas in assignment.partitions.items():
                if p not in known:
                    self.context.set_assignment(TopicPartition(topic, p), replicas)
        return added

    def forget_topic(self, topic: str) -> None:
        self.zk.zk.unregister_znode_handler(topic_path(topic))

    def resign(self) -> None:
        """Stop acting as controller (Kafka's onControllerResignation)."""
        was_active = self.is_active
        with self._state_lock:
            self._active = False
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        zk = self.zk.zk
        for path in (
            BROKER_IDS_PATH, TOPICS_PATH, DELETE_TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH,
            LOG_DIR_EVENT_NOTIFICATION_PATH,
        ):
            zk.unregister_child_handler(path)
        zk.unregister_znode_handler(PREFERRED_REPLICA_ELECTION_PATH)
        if self.reassignment is not None:
            self.reassignment.stop()
            self.reassignment = None
        for topic in self.context.all_topics:
            zk.unregister_znode_handler(topic_path(topic))
        for broker_id in self.context.live_brokers:
            zk.unregister_znode_handler(broker_id_path(broker_id))
        if self.channel is not None:
            self.channel.shutdown()
            self.channel = None
        self.context.reset()
        if was_active:
            log.info("broker %d resigned as controller", self.broker_id)

    # --- helpers used by the event handlers --------------------------------------------------------

    def unclean_enabled(self, topic: str) -> bool:
        try:
            override = self.zk.get_entity_config("topics", topic).get("unclean.leader.election.enable")
        except MalformedZnodeError as exc:
            log.error("ignoring topic config: %s", exc)
            override = None
        if override is None:
            return self.config.unclean_leader_election_enable
        return override.strip().lower() == "true"

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """ControlledShutdown: a broker epoch older than the registration's czxid is refused; -1 (a
        broker from before KIP-380) is let through, as Kafka does."""
        current = self.context.broker_epoch(broker_id)
        if broker_epoch != -1 and broker_epoch < current:
            raise StaleBrokerEpochError(
                f"broker epoch {broker_epoch} of broker {broker_id} is older than the current {current}"
            )

    def check_live_broker_epoch(
        self, broker_id: int, broker_epoch: int, unknown: type[CoordinationError] = StaleBrokerEpochError
    ) -> None:
        """AlterPartition and AllocateProducerIds come only from a live broker at its live epoch: a
        zombie (a broker that lost its session, or a previous incarnation) changes nothing. An unknown
        broker is ``unknown`` (AlterPartition: STALE_BROKER_EPOCH, AllocateProducerIds:
        BROKER_ID_NOT_REGISTERED), any other epoch than the live one STALE_BROKER_EPOCH."""
        info = self.context.live_brokers.get(broker_id)
        if info is None:
            raise unknown(f"broker {broker_id} is not live")
        if broker_epoch != info.epoch:
            raise StaleBrokerEpochError(
                f"broker epoch {broker_epoch} of broker {broker_id} is not the live one {info.epoch}"
            )

    def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        replicas = self.context.replicas_for_partitions(partitions)
        self.partition_sm.handle_state_changes(partitions, PartitionState.NEW)
        self.replica_sm.handle_state_changes(replicas, ReplicaState.NEW)
        self.partition_sm.handle_state_changes(partitions, PartitionState.ONLINE)
        self.replica_sm.handle_state_changes(replicas, ReplicaState.ONLINE)

    def _schedule_rebalance(self) -> None:
        if not self.config.auto_leader_rebalance_enable:
            return

        def fire() -> None:
            self.enqueue("auto_leader_rebalance")

        self._rebalance_timer = threading.Timer(self.config.leader_imbalance_check_interval_seconds, fire)
        self._rebalance_timer.daemon = True
        self._rebalance_timer.start()

    def schedule_next_rebalance(self) -> None:
        if self.is_active:
            self._schedule_rebalance()

    # --- request handlers, called by the broker's API layer ---------------------------------------

    def create_topics(
        self,
        topics: list[NewTopic],
        validate_only: bool = False,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
    ) -> dict[str, CoordinationError | None]:
        """CreateTopics: per topic None or the error. Only writes ZooKeeper; the controller's own
        topic watch then elects leaders (as with Kafka's ZkAdminManager)."""
        self.require_active()
        admin = AdminZkClient(self.zk)
        results: dict[str, CoordinationError | None] = {}
        for topic in topics:
            try:
                admin.create_topic(topic, default_partitions, default_replication_factor, validate_only)
                results[topic.name] = None
            except CoordinationError as exc:
                results[topic.name] = exc
        return results

    def delete_topics(self, topics: list[str]) -> dict[str, CoordinationError | None]:
        self.require_active()
        admin = AdminZkClient(self.zk)
        results: dict[str, CoordinationError | None] = {}
        for topic in topics:
            try:
                if not self.config.delete_topic_enable:
                    raise TopicDeletionDisabledError("Topic deletion is disabled.")
                admin.delete_topic(topic)
                results[topic] = None
            except CoordinationError as exc:
                results[topic] = exc
        return results

    def create_partitions(
        self, increases: dict[str, tuple[int, list[list[int]] | None]], validate_only: bool = False
    ) -> dict[str, CoordinationError | None]:
        """CreatePartitions: topic -> (new total count, explicit assignment of the new ones or None)."""
        self.require_active()
        admin = AdminZkClient(self.zk)
        results: dict[str, CoordinationError | None] = {}
        for topic, (count, assignment) in increases.items():
            try:
                if topic in self.context.topics_to_be_deleted:
                    raise InvalidTopicError(f"The topic '{topic}' is queued for deletion.")
                admin.add_partitions(topic, count, assignment, validate_only)
                results[topic] = None
            except CoordinationError as exc:
                results[topic] = exc
        return results

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """The topic's unclean.leader.election.enable became true: its offline partitions may now
        elect an out-of-sync replica, without waiting for a broker to come or go (Kafka's
        TopicUncleanLeaderElectionEnable)."""
        if self.is_active:
            self.enqueue("topic_unclean_leader_election_enable", topic)

    def elect_leaders(self, partitions: set[TopicPartition] | None, unclean: bool = False) -> Future[Any]:
        """ElectLeaders (preferred, or unclean): Future of {partition: None | error}."""
        return self.enqueue("elect_leaders", partitions, unclean)

    def alter_partition(self, broker_id: int, broker_epoch: int, proposals: dict[TopicPartition, Any]) -> Future[Any]:
        """AlterPartition: proposals are LeaderAndIsr (leader epoch and partition epoch as the leader
        knows them, new ISR); Future of {partition: new LeaderAndIsr | error}."""
        return self.enqueue("alter_partition", broker_id, broker_epoch, proposals)

    def alter_partition_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None]) -> Future[Any]:
        """AlterPartitionReassignments: target replicas per partition (None cancels); Future of
        {partition: None | error}."""
        return self.enqueue("alter_partition_reassignments", targets)

    def list_partition_reassignments(self, partitions: set[TopicPartition] | None = None) -> Future[Any]:
        """ListPartitionReassignments: Future of {partition: ReplicaAssignment} for in-flight ones."""
        return self.enqueue("list_partition_reassignments", partitions)

    def update_features(self, updates: list[FeatureUpdate]) -> Future[Any]:
        """UpdateFeatures: Future of each feature's FeatureUpdateResult."""
        return self.enqueue("update_features", updates)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[Any]:
        """ControlledShutdown: Future of the partitions the broker still leads."""
        return self.enqueue("controlled_shutdown", broker_id, broker_epoch)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdBlock:
        self.require_active()
        self.check_live_broker_epoch(broker_id, broker_epoch, BrokerIdNotRegisteredError)
        return allocate_producer_id_block(self.zk, broker_id)
