"""The share-group components of one broker and their timers (on when ``group.share.enable``).

The share group coordinator (membership), the share session cache, the SharePartitionManager
(in-flight records), the share coordinator (their durable state in ``__share_group_state``) and
the persister between them are built together: a member that is fenced has its share sessions dropped
and its acquired records released, and acquisition locks that run out make records
available again without waiting for the next fetch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.admin.group_configs import GroupConfigDef, GroupConfigManager, register
from broker.coordinator.coordinator_records import Record
from broker.coordinator.internal_topic import InternalTopicPartitions
from broker.coordinator.share.share_group_coordinator import ShareGroupCoordinator, ShareGroupSettings
from broker.share.persister import Persister
from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, RunBlocking, ShareCoordinator
from coordination.admin_zk_client import NewTopic
from coordination.errors import CoordinationError, TopicExistsError
from broker.share.share_partition import SharePartitionConfig
from broker.share.share_partition_manager import (
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    SharePartitionManager,
    now_ms,
    parse_auto_offset_reset,
)
from broker.share.share_session_cache import ShareSessionCache
from protocol.errors import Errors

if TYPE_CHECKING:
    from broker.config import KafkaConfig
    from broker.coordinator.group.group_coordinator import GroupCoordinator
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager
    from broker.security.client_security import ClientSecurity
    from coordination.admin_zk_client import AdminZkClient

log = logging.getLogger(__name__)

LOCK_EXPIRY_CHECK_MS = 100
SESSION_EXPIRY_CHECK_MS = 500


@dataclass
class ShareServices:
    coordinator: ShareGroupCoordinator
    sessions: ShareSessionCache
    partitions: SharePartitionManager
    state: ShareCoordinator
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.coordinator.member_fenced_listeners.append(self._on_member_fenced)

    def _on_member_fenced(self, group_id: str, member_id: str) -> None:
        self.sessions.remove_member(group_id, member_id)
        self.partitions.persist_in_background(self.partitions.release_member(group_id, member_id))

    def startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._every(LOCK_EXPIRY_CHECK_MS, self.partitions.expire_locks),
                                        name="share-lock-expiry"),
                       loop.create_task(self._every(SESSION_EXPIRY_CHECK_MS,
                                                    lambda: self.coordinator.expire_sessions(now_ms())),
                                        name="share-member-expiry")]

    def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.state.shutdown()

    @staticmethod
    async def _every(interval_ms: int, action) -> None:  # type: ignore[no-untyped-def]
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                action()
            except Exception:
                log.exception("share-group timer failed")


# The share-group configs (ConfigResource type GROUP), as Kafka 4.2's GroupConfig has them.
register(GroupConfigDef("share.auto.offset.reset", "", default=LATEST, parser=parse_auto_offset_reset))
register(GroupConfigDef("share.isolation.level", "", choices=(READ_UNCOMMITTED, READ_COMMITTED),
                        default=READ_UNCOMMITTED))
register(GroupConfigDef("share.record.lock.duration.ms", "group.share.record.lock.duration.ms",
                        ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")))
register(GroupConfigDef("share.session.timeout.ms", "group.share.session.timeout.ms",
                        ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")))
register(GroupConfigDef("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms",
                        ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")))


def build_share_services(config: KafkaConfig, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                         group_coordinator: GroupCoordinator, admin_zk: AdminZkClient, run_blocking: RunBlocking,
                         security: ClientSecurity, group_configs: GroupConfigManager) -> ShareServices:
    """The share-group components from the group.share.* broker configs."""
    settings = ShareGroupSettings(session_timeout_ms=config.get("group.share.session.timeout.ms"),
                                  heartbeat_interval_ms=config.get("group.share.heartbeat.interval.ms"),
                                  max_size=config.get("group.share.max.size"))
    partition_config = SharePartitionConfig(
        record_lock_duration_ms=config.get("group.share.record.lock.duration.ms"),
        delivery_count_limit=config.get("group.share.delivery.count.limit"),
        max_record_locks=config.get("group.share.partition.max.record.locks"))

    def topic(name: str) -> tuple[uuid.UUID, int] | None:
        if not metadata_cache.contains_topic(name):
            return None
        return metadata_cache.topic_id(name), len(metadata_cache.topic_partitions(name))

    def is_classic_group(group_id: str) -> bool:
        return group_coordinator.manager.get_group(group_id) is not None

    state_partitions = InternalTopicPartitions(SHARE_GROUP_STATE_TOPIC, metadata_cache,
                                               config.get("share.coordinator.state.topic.num.partitions"))
    state_topic = NewTopic(SHARE_GROUP_STATE_TOPIC, state_partitions.configured,
                           config.get("share.coordinator.state.topic.replication.factor"), configs={
                               "cleanup.policy": "compact", "compression.type": "producer",
                               "min.insync.replicas": str(config.get("share.coordinator.state.topic.min.isr")),
                               "segment.bytes": str(config.get("share.coordinator.state.topic.segment.bytes"))})

    async def create_state_topic() -> None:
        try:
            await run_blocking(admin_zk.create_topic, state_topic)
            log.info("Created %s with %d partitions", SHARE_GROUP_STATE_TOPIC, state_topic.num_partitions)
        except TopicExistsError:
            pass
        except CoordinationError as exc:
            log.warning("Cannot create %s: %s", SHARE_GROUP_STATE_TOPIC, exc)

    write_timeout_ms = config.get("share.coordinator.write.timeout.ms")
    persister = Persister(metadata_cache, config.inter_broker_listener_name, create_state_topic,
                          config.get("request.timeout.ms"), security)
    state = ShareCoordinator(replica_manager, run_blocking, lambda: state_partitions.count,
                             config.get("share.coordinator.snapshot.update.records.per.snapshot"), write_timeout_ms)
    coordinator = ShareGroupCoordinator(settings, topic, is_classic_group)
    manager = group_coordinator.manager

    async def write(group_id: str, written: list[Record]) -> Errors:
        return (await manager.append_records(group_id, written))[0]

    coordinator.write = write
    coordinator.group_config = group_configs.get
    manager.share_groups_loaded_listeners.append(lambda groups: coordinator.load(groups, now_ms()))
    manager.partition_unloaded_listeners.append(
        lambda partition: coordinator.unload(lambda group_id: manager.partition_for(group_id) != partition))
    return ShareServices(coordinator,
                         ShareSessionCache(config.get("group.share.max.share.sessions"), settings.session_timeout_ms),
                         SharePartitionManager(replica_manager, partition_config, persister, group_configs.get), state)
