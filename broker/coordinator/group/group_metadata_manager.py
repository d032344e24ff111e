"""GroupMetadataManager: the groups of the ``__consumer_offsets`` partitions this broker leads.

A group lives in partition ``abs(javaHashCode(group.id)) % partitions``. Becoming leader of a
partition loads its groups by replaying the log from the start (COORDINATOR_LOAD_IN_PROGRESS
meanwhile); losing it unloads them. Offset commits and group metadata are written with Kafka's
record schemas (``protocol.consumer_offsets_records``) and acks=all; append errors become the
group APIs' codes as Kafka's GroupMetadataManager maps them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.coordinator.consumer import consumer_group_records as consumer_records
from broker.coordinator.share import share_group_records as share_records
from broker.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
    PendingTxnOffset,
    TopicPartition,
    now_ms,
)
from broker.coordinator.internal_topic import InternalTopicPartitions, replay_partition_log
from protocol import consumer_offsets_records as records
from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import ProtocolError
from protocol.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.errors import StorageError
from storage.producer_state import SENTINEL_GUARD, AppendOrigin, VerificationGuard, read_end_txn_marker

if TYPE_CHECKING:
    from broker.coordinator.share.share_group import ShareGroup
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"
GROUP_METADATA_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1

RunBlocking = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class GroupConfig:
    """The broker's group.* and offsets.* settings (Kafka's GroupConfig and OffsetConfig)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    max_metadata_size: int = 4096
    load_buffer_size: int = 5 * 1024 * 1024
    offsets_topic_num_partitions: int = 50
    offsets_topic_compression: int = 0
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_commit_timeout_ms: int = 5000

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        return cls(
            min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
            max_size=config.get("group.max.size"),
            max_metadata_size=config.get("offset.metadata.max.bytes"),
            load_buffer_size=config.get("offsets.load.buffer.size"),
            offsets_topic_num_partitions=config.get("offsets.topic.num.partitions"),
            offsets_topic_compression=config.get("offsets.topic.compression.codec"),
            offsets_retention_ms=config.get("offsets.retention.minutes") * 60 * 1000,
            offsets_retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
            offset_commit_timeout_ms=config.get("offsets.commit.timeout.ms"),
        )


def group_store_error(error: Errors) -> Errors:
    """A failed group-metadata append as JoinGroup/SyncGroup report it."""
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error is Errors.REQUEST_TIMED_OUT:
        return Errors.REBALANCE_IN_PROGRESS
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


def offset_store_error(error: Errors) -> Errors:
    """A failed offset-commit append (or transaction verification) as OffsetCommit reports it."""
    if error is Errors.NETWORK_EXCEPTION:  # verification failed: older clients retry this one correctly
        return Errors.COORDINATOR_LOAD_IN_PROGRESS
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return error


# --- record <-> state ------------------------------------------------------------------------------

def offset_commit_value(offset: OffsetAndMetadata) -> records.OffsetCommitValue:
    if offset.expire_timestamp is not None:  # only value v1 carries an explicit expiry
        return records.OffsetCommitValue(offset.offset, offset.metadata, offset.commit_timestamp,
                                         expire_timestamp=offset.expire_timestamp,
                                         version=OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
    return records.OffsetCommitValue(offset.offset, offset.metadata, offset.commit_timestamp,
                                     leader_epoch=offset.leader_epoch, version=OFFSET_COMMIT_VALUE_VERSION)


def offset_from_value(value: records.OffsetCommitValue) -> OffsetAndMetadata:
    expire = value.expire_timestamp if value.version == 1 and value.expire_timestamp != -1 else None
    return OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, expire)


def group_metadata_value(group: GroupMetadata, assignment: dict[str, bytes]) -> records.GroupMetadataValue:
    protocol = group.protocol_name
    members = [records.MemberMetadata(
        member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
        session_timeout=m.session_timeout_ms,
        subscription=m.metadata(protocol) if protocol is not None else b"",
        assignment=assignment.get(m.member_id, b""), rebalance_timeout=m.rebalance_timeout_ms,
        group_instance_id=m.group_instance_id) for m in group.members.values()]
    return records.GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=protocol,
        leader=group.leader_id, members=members,
        current_state_timestamp=group.state_timestamp if group.state_timestamp is not None else -1,
        version=GROUP_METADATA_VALUE_VERSION)


def group_from_value(group_id: str, value: records.GroupMetadataValue) -> GroupMetadata:
    """A loaded group: Stable with its members and their assignments, or Empty."""
    group = GroupMetadata(group_id, GroupState.STABLE if value.members else GroupState.EMPTY)
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.generation_id = value.generation
    group.leader_id = value.leader
    group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    for m in value.members:
        member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                                m.session_timeout, value.protocol_type,
                                [(value.protocol or "", m.subscription)])
        member.assignment = m.assignment
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    group.subscribed_topics = group._compute_subscribed_topics()
    return group


CommitRecord = tuple[OffsetAndMetadata, int]  # an offset and the log offset of its commit record's batch


@dataclass
class LoadedPartition:
    """What replaying one partition's log left: None values are tombstones. Transactional offset
    commits stay pending per producer until its marker: COMMIT applies them (unless a newer
    record committed the partition meanwhile), ABORT drops them; those still pending at the end
    are loaded as pending, as Kafka's GroupMetadataManager loads them."""

    offsets: dict[str, dict[TopicPartition, CommitRecord | None]] = field(default_factory=dict)
    groups: dict[str, records.GroupMetadataValue | None] = field(default_factory=dict)
    pending: dict[int, dict[tuple[str, TopicPartition], CommitRecord]] = field(default_factory=dict)
    consumer_groups: consumer_records.ConsumerGroupReplay = field(default_factory=consumer_records.ConsumerGroupReplay)
    share_groups: share_records.ShareGroupReplay = field(default_factory=share_records.ShareGroupReplay)

    def apply(self, buf: bytes) -> None:
        """Replay the whole batches in ``buf``."""
        for pos, header in iter_log_entries(buf):
            if header.is_control:
                self._apply_marker(memoryview(buf)[pos:pos + header.size], header.producer_id)
                continue
            pending = self.pending.setdefault(header.producer_id, {}) \
                if getattr(header, "is_transactional", False) else None
            for record in decode_entry_records(buf, pos):
                if record.key is None:
                    continue
                if not records.is_classic_group_key(record.key):
                    kind = consumer_records.record_type(record.key)
                    if kind in consumer_records.RECORD_TYPES:
                        self.consumer_groups.apply(record.key, record.value)
                    elif kind in share_records.RECORD_TYPES:
                        self.share_groups.apply(record.key, record.value)
                    continue
                key = records.decode_key(record.key)
                if isinstance(key, records.OffsetCommitKey):
                    tp = (key.topic, key.partition)
                    value = None if record.value is None else (
                        offset_from_value(records.decode_offset_commit_value(record.value)), header.base_offset)
                    if pending is None:
                        self.offsets.setdefault(key.group, {})[tp] = value
                    elif value is None:
                        pending.pop((key.group, tp), None)
                    else:
                        pending[(key.group, tp)] = value
                else:
                    self.groups[key.group] = None if record.value is None else \
                        records.decode_group_metadata_value(record.value)

    def _apply_marker(self, batch: memoryview, producer_id: int) -> None:
        marker = read_end_txn_marker(batch)
        if marker is None:  # not a transaction marker, or emptied by the cleaner
            return
        pending = self.pending.pop(producer_id, {})
        if marker.is_commit:
            for (group_id, tp), commit in pending.items():
                current = self.offsets.get(group_id, {}).get(tp)
                if current is None or current[1] < commit[1]:
                    self.offsets.setdefault(group_id, {})[tp] = commit

    def build_groups(self) -> list[GroupMetadata]:
        built: dict[str, GroupMetadata] = {}
        for group_id, value in self.groups.items():
            if value is not None:
                built[group_id] = group_from_value(group_id, value)
        for consumer_group in self.consumer_groups.build():
            entry = built.setdefault(consumer_group.group_id, GroupMetadata(consumer_group.group_id))
            entry.consumer_group = consumer_group
        pending_by_group: dict[str, dict[int, dict[TopicPartition, PendingTxnOffset]]] = {}
        for producer_id, commits in self.pending.items():
            for (group_id, tp), (offset, record_offset) in commits.items():
                pending_by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = \
                    PendingTxnOffset(offset, record_offset)
        for group_id in list(self.offsets) + [g for g in pending_by_group if g not in self.offsets]:
            live = {tp: c for tp, c in self.offsets.get(group_id, {}).items() if c is not None}
            pending = pending_by_group.get(group_id, {})
            if not live and not pending and group_id not in built:
                continue
            group = built.get(group_id)
            if group is None:
                group = built[group_id] = GroupMetadata(group_id)
                group.state_timestamp = None  # offsets-only group: expire by commit time
            for tp, (offset, record_offset) in live.items():
                group.offsets[tp] = offset
                group.offset_record_offsets[tp] = record_offset
            group.pending_txn_offset_commits.update(pending)
        return list(built.values())


def read_partition_log(tp_log: Any, buffer_size: int) -> LoadedPartition:
    """Blocking: replay a partition's log from its start to its current end."""
    loaded = LoadedPartition()
    replay_partition_log(tp_log, buffer_size, loaded.apply)
    return loaded


class GroupMetadataManager:
    def __init__(self, broker_id: int, config: GroupConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, run_blocking: RunBlocking) -> None:
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.run_blocking = run_blocking
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: dict[int, int] = {}  # partition -> leader epoch being loaded
        # producer id -> groups holding its pending transactional offsets (Kafka's openGroupsForProducer)
        self.open_groups_of_producer: dict[int, set[str]] = {}
        self._partitions = InternalTopicPartitions(GROUP_METADATA_TOPIC, metadata_cache,
                                                   config.offsets_topic_num_partitions)
        # Share groups live with the share group coordinator: it is handed those a partition held
        # when it loads, and told when a partition is unloaded.
        self.share_groups_loaded_listeners: list[Callable[[list[ShareGroup]], None]] = []
        self.partition_unloaded_listeners: list[Callable[[int], None]] = []

    # --- partitioning ---------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return self._partitions.partition_for(group_id)

    def is_partition_owned(self, partition: int) -> bool:
        return partition in self.owned_partitions

    def is_coordinator_for_group(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    # --- the cache --------------------------------------------------------------------------------
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def group_not_exists(self, group_id: str) -> bool:
        """Kafka's groupNotExists: owned here and either unknown or Dead."""
        if not self.is_coordinator_for_group(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_in(GroupState.DEAD)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # --- loading and unloading ------------------------------------------------------------------
    async def load_partition(self, partition: int, leader_epoch: int,
                             on_group_loaded: Callable[[GroupMetadata], None]) -> None:
        """Replay the partition (off the loop) and install its groups, unless leadership moved meanwhile."""
        self.loading_partitions[partition] = leader_epoch
        start = now_ms()
        try:
            tp = self.replica_manager.get_partition(GROUP_METADATA_TOPIC, partition)
            if tp is None or tp.log is None:
                raise KafkaApiError(Errors.NOT_LEADER_OR_FOLLOWER)
            loaded = await self.run_blocking(read_partition_log, tp.log, self.config.load_buffer_size)
            groups = loaded.build_groups()
            share_groups = loaded.share_groups.build()
        except (KafkaApiError, StorageError, ProtocolError, OSError) as exc:
            log.error("Error loading offsets from %s-%d: %s", GROUP_METADATA_TOPIC, partition, exc)
            if self.loading_partitions.get(partition) == leader_epoch:
                del self.loading_partitions[partition]
            return
        if self.loading_partitions.get(partition) != leader_epoch:
            log.info("Discarding the load of %s-%d: leadership changed meanwhile", GROUP_METADATA_TOPIC, partition)
            return
        del self.loading_partitions[partition]
        self.owned_partitions.add(partition)
        for group in groups:
            if self.groups.get(group.group_id) is not None:
                continue  # created meanwhile (cannot happen while loading, kept for safety)
            self.groups[group.group_id] = group
            for producer_id in group.pending_txn_offset_commits:
                self.open_groups_of_producer.setdefault(producer_id, set()).add(group.group_id)
            on_group_loaded(group)
        for listener in self.share_groups_loaded_listeners:
            listener(share_groups)
        log.info("Finished loading offsets and group metadata from %s-%d in %d milliseconds (%d groups)",
                 GROUP_METADATA_TOPIC, partition, now_ms() - start, len(groups))

    def unload_partition(self, partition: int, on_group_unloaded: Callable[[GroupMetadata], None]) -> int:
        self.loading_partitions.pop(partition, None)
        self.owned_partitions.discard(partition)
        for listener in self.partition_unloaded_listeners:
            listener(partition)
        removed = [g for g_id, g in self.groups.items() if self.partition_for(g_id) == partition]
        for group in removed:
            del self.groups[group.group_id]
            for producer_id in list(self.open_groups_of_producer):
                self._remove_producer_group(producer_id, group.group_id)
            on_group_unloaded(group)
        if removed:
            log.info("Finished unloading %s-%d: removed %d cached groups", GROUP_METADATA_TOPIC, partition,
                     len(removed))
        return len(removed)

    # --- writes -------------------------------------------------------------------------------------
    def _batch(self, entries: Iterable[tuple[bytes, bytes | None]], producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH) -> bytearray:
        """One batch of records; with a producer id, a transactional batch of that producer (sequence 0,
        as Kafka writes transactional offset commits: the coordinator origin skips sequence checks)."""
        transactional = producer_id != NO_PRODUCER_ID
        builder = RecordBatchBuilder(magic=2, compression=self.config.offsets_topic_compression,
                                     producer_id=producer_id, producer_epoch=producer_epoch,
                                     base_sequence=0 if transactional else NO_SEQUENCE,
                                     is_transactional=transactional)
        timestamp = now_ms()
        for key, value in entries:
            builder.append(timestamp, key, value)
        return builder.build()

    async def _append(self, group_id: str, batch: bytearray,
                      verification_guard: VerificationGuard = SENTINEL_GUARD) -> tuple[Errors, int]:
        """(error, offset of the appended batch) once the ISR has it."""
        try:
            info = await self.replica_manager.append_and_wait(
                GROUP_METADATA_TOPIC, self.partition_for(group_id), batch, self.config.offset_commit_timeout_ms,
                AppendOrigin.COORDINATOR, verification_guard)
        except KafkaApiError as exc:
            return exc.error, -1
        except StorageError as exc:
            return Errors[exc.error_name], -1
        return Errors.NONE, info.first_offset

    async def append_records(self, group_id: str, entries: Iterable[tuple[bytes, bytes | None]]) -> tuple[Errors, int]:
        """Append one batch of the group's records (a consumer group's) and wait for the ISR."""
        return await self._append(group_id, self._batch(entries))

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> Errors:
        key = records.encode_key(records.GroupMetadataKey(group.group_id))
        value = records.encode_group_metadata_value(group_metadata_value(group, assignment))
        error, _ = await self._append(group.group_id, self._batch([(key, value)]))
        if error is not Errors.NONE:
            log.debug("Storing metadata of group %s generation %d failed: %s", group.group_id, group.generation_id,
                      error.name)
        return group_store_error(error)

    def valid_metadata(self, metadata: str | None) -> bool:
        return metadata is None or len(metadata) <= self.config.max_metadata_size

    async def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata],
                            producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                            verification_guard: VerificationGuard = SENTINEL_GUARD) -> dict[TopicPartition, Errors]:
        """Append the commits (those whose metadata fits), then make them visible; per-partition errors.

        With a producer id (TxnOffsetCommit) they are written in that producer's transaction and stay
        pending until its marker (``handle_txn_completion``)."""
        valid = {tp: o for tp, o in offsets.items() if self.valid_metadata(o.metadata)}
        error = Errors.NONE
        if valid:
            transactional = producer_id != NO_PRODUCER_ID
            entries = [(records.encode_key(records.OffsetCommitKey(group.group_id, tp[0], tp[1])),
                        records.encode_offset_commit_value(offset_commit_value(o))) for tp, o in valid.items()]
            if transactional:
                self.open_groups_of_producer.setdefault(producer_id, set()).add(group.group_id)
                group.prepare_txn_offset_commit(producer_id, valid)
            else:
                group.prepare_offset_commit(valid)
            error, record_offset = await self._append(
                group.group_id, self._batch(entries, producer_id, producer_epoch), verification_guard)
            error = offset_store_error(error)
            for tp, o in valid.items():
                if error is Errors.NONE and not group.is_in(GroupState.DEAD):
                    if transactional:
                        group.on_txn_offset_commit_append(producer_id, tp, o, record_offset)
                    else:
                        group.on_offset_commit_append(tp, o, record_offset)
                elif transactional:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
                else:
                    group.fail_pending_offset_write(tp, o)
            if transactional and not group.has_pending_offset_commits_from_producer(producer_id):
                self._remove_producer_group(producer_id, group.group_id)
        return {tp: (error if tp in valid else Errors.OFFSET_METADATA_TOO_LARGE) for tp in offsets}

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.open_groups_of_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.open_groups_of_producer[producer_id]

    def handle_txn_completion(self, producer_id: int, partitions: Iterable[int], is_commit: bool) -> None:
        """A marker of ``producer_id`` is written to these offsets partitions: settle its pending offsets there."""
        completed = set(partitions)
        for group_id in [g for g in self.open_groups_of_producer.get(producer_id, ())
                         if self.partition_for(g) in completed]:
            group = self.groups.get(group_id)
            if group is not None and not group.is_in(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, is_commit)
            else:
                log.info("Group %s moved away after the transaction marker of producer %d was written; "
                         "skipping the cache update", group_id, producer_id)
            self._remove_producer_group(producer_id, group_id)

    def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                               selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]]
                               ) -> list[asyncio.Task[None]]:
        """Remove offsets chosen by ``selector``; an Empty group left without offsets dies. Tombstones
        are appended without waiting for replication: a lost one is written again by the next purge."""
        tasks = []
        for group in groups:
            removed = selector(group)
            consumer = group.consumer_group
            if group.is_in(GroupState.EMPTY) and not group.has_offsets and (consumer is None or consumer.is_empty):
                log.info("Group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
                group.transition_to(GroupState.DEAD)
            entries: list[tuple[bytes, bytes | None]] = [
                (records.encode_key(records.OffsetCommitKey(group.group_id, tp[0], tp[1])), None) for tp in removed]
            if group.is_in(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:  # generation 0: the group only ever stored offsets
                    entries.append((records.encode_key(records.GroupMetadataKey(group.group_id)), None))
                if consumer is not None:
                    consumer.mark_dead()
                    entries += consumer_records.group_tombstones(consumer)
            if entries and self.is_coordinator_for_group(group.group_id):
                tasks.append(asyncio.get_running_loop().create_task(
                    self._append_tombstones(group.group_id, self._batch(entries))))
        return tasks

    async def _append_tombstones(self, group_id: str, batch: bytearray) -> None:
        try:
            await self.replica_manager.append_to_leader(GROUP_METADATA_TOPIC, self.partition_for(group_id), batch, 1,
                                                        AppendOrigin.COORDINATOR)
        except (KafkaApiError, StorageError) as exc:
            log.warning("Writing tombstones of group %s failed: %s", group_id, exc)

    def expire_offsets(self) -> list[asyncio.Task[None]]:
        current, retention = now_ms(), self.config.offsets_retention_ms
        return self.cleanup_group_metadata(list(self.groups.values()),
                                           lambda group: group.remove_expired_offsets(current, retention))
