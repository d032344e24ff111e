"""SharePartitionManager: the share-partitions this broker leads, and share fetches over them.

As Kafka's SharePartitionManager: one SharePartition per (share group, topic partition) led here,
created on the first fetch from the state the share coordinator holds (through the persister), or,
for a share-partition never seen before, at the start offset ``share.auto.offset.reset`` picks
(``latest``, ``earliest`` or ``by_duration:<ISO-8601 duration>``). Every change of its records'
states is written back before the request that made it is answered (acquisitions too, so delivery
counts survive a failover); lock expiries are written in the background. A fetch reads each partition from its first
available offset, acquires what it can for the member and returns the log batches that hold the
acquired records with their ranges; with ``read_committed`` the batches of aborted transactions
(found through the transaction index) and control batches are archived, never delivered.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from broker.replica_manager import FetchPartitionSpec, PartitionReadResult, ReplicaManager
from broker.share.persister import Persister
from broker.share.share_partition import (
    AcquiredRecords,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from protocol.errors import Errors, KafkaApiError
from protocol.records.batch import iter_batch_positions, read_batch_header
from storage.log import FetchIsolation

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ShareKey = tuple[str, str, int]  # (group id, topic, partition)

LATEST, EARLIEST, BY_DURATION = "latest", "earliest", "by_duration:"
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
# The share group configs (kafka-configs --entity-type groups) and their defaults, as Kafka 4.2's.
SHARE_GROUP_CONFIG_DEFAULTS = {"share.auto.offset.reset": LATEST, "share.isolation.level": READ_UNCOMMITTED}
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def duration_ms(text: str) -> int:
    """An ISO-8601 duration as ``by_duration:`` takes it (PnDTnHnMn.nS), in milliseconds."""
    match = _DURATION.match(text)
    if match is None or text in ("P", "PT"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration")
    days, hours, minutes, seconds = match.groups()
    return int(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
               + float(seconds or 0) * 1000)


def parse_auto_offset_reset(text: str) -> str:
    """share.auto.offset.reset as Kafka 4.2 accepts it: latest, earliest or by_duration:<ISO-8601>."""
    value = text.strip()
    if value.lower() in (LATEST, EARLIEST):
        return value.lower()
    if value.lower().startswith(BY_DURATION):
        duration = value[len(BY_DURATION):].strip().upper()
        try:
            duration_ms(duration)
        except ValueError:
            raise ValueError(f"Invalid duration {duration!r} for by_duration: it must be an ISO-8601 duration "
                             "(PnDTnHnMn.nS) and not negative") from None
        return BY_DURATION + duration
    raise ValueError("The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")


def persister_error(error: Errors) -> Errors:
    """A share-partition's error for a failed state read or write (Kafka's fetchPersisterError):
    the share coordinator unavailable stays so, a fenced epoch means another leader owns it."""
    if error in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.FENCED_STATE_EPOCH, Errors.FENCED_LEADER_EPOCH):
        return Errors.NOT_LEADER_OR_FOLLOWER
    if error in (Errors.GROUP_ID_NOT_FOUND, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER,
                 Errors.KAFKA_STORAGE_ERROR):
        return error
    return Errors.UNKNOWN_SERVER_ERROR


@dataclass
class ShareFetchPartitionResult:
    error: Errors = Errors.NONE
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


def now_ms() -> int:
    return int(time.time() * 1000)


class SharePartitionManager:
    def __init__(self, replica_manager: ReplicaManager, config: SharePartitionConfig, persister: Persister,
                 group_config: Callable[[str, str], Any] = lambda _group, name: SHARE_GROUP_CONFIG_DEFAULTS.get(name)
                 ) -> None:
        self.replica_manager = replica_manager
        self.config = config
        self.persister = persister
        self._group_config = group_config  # (group id, share.* name) -> the group's value
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._initializing: dict[ShareKey, asyncio.Future[None]] = {}
        self._writers: dict[ShareKey, _StateWriter] = {}

    def read_committed(self, group_id: str) -> bool:
        return self._group_config(group_id, "share.isolation.level") == READ_COMMITTED

    def record_lock_duration_ms(self, group_id: str) -> int:
        return self._partition_config(group_id).record_lock_duration_ms

    def _partition_config(self, group_id: str) -> SharePartitionConfig:
        """The broker's share-partition settings with the group's share.record.lock.duration.ms,
        read at every fetch and acknowledgement so that a changed group config applies at once."""
        lock_ms = self._group_config(group_id, "share.record.lock.duration.ms")
        if lock_ms is None or lock_ms == self.config.record_lock_duration_ms:
            return self.config
        return replace(self.config, record_lock_duration_ms=lock_ms)

    # --- share partitions ----------------------------------------------------------------------

    async def initialize(self, group_id: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Errors]:
        """Load the share-partitions not loaded yet from their persisted state; the errors of those
        that cannot be (not the leader, the share coordinator unavailable)."""
        errors: dict[TopicPartition, Errors] = {}
        for tp in partitions:
            key = (group_id, *tp)
            if key in self.partitions:
                continue
            pending = self._initializing.get(key)
            if pending is None:
                pending = self._initializing[key] = asyncio.ensure_future(self._load(key))
                pending.add_done_callback(lambda _f, k=key: self._initializing.pop(k, None))
            try:
                await asyncio.shield(pending)
            except KafkaApiError as exc:
                errors[tp] = persister_error(exc.error)
        return errors

    async def _load(self, key: ShareKey) -> None:
        group_id, topic, partition = key
        leader, tp_log = self.replica_manager.leader_partition_and_log(topic, partition)
        topic_id = self.replica_manager.metadata_cache.topic_id(topic)
        state = await self.persister.read(group_id, topic_id, partition, leader.leader_epoch)
        if state.start_offset >= 0:
            share_partition = SharePartition(state.start_offset, self.config, state.batches, state.state_epoch)
        else:
            share_partition = SharePartition(self._start_offset(group_id, tp_log), self.config)
            await self.persister.write(group_id, topic_id, partition, 0, leader.leader_epoch,
                                       share_partition.start_offset, [])
        if key not in self.partitions:
            self.partitions[key] = share_partition
            log.info("Share-partition %s-%d of group %s starts at offset %d with %d state batches", topic, partition,
                     group_id, share_partition.start_offset, len(state.batches))

    def _share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition:
        found = self.partitions.get((group_id, topic, partition))
        if found is None:
            self.replica_manager.leader_partition_and_log(topic, partition)  # NOT_LEADER_OR_FOLLOWER, ...
            raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE)  # leader, but its state is not loaded
        found.config = self._partition_config(group_id)
        return found

    # --- writing the state back -----------------------------------------------------------------

    async def persist(self, keys: Iterable[ShareKey]) -> dict[ShareKey, Errors]:
        """Write the current state of these share-partitions; the errors of those that failed."""
        errors = {}
        for key in keys:
            if key not in self.partitions:
                continue
            writer = self._writers.get(key)
            if writer is None:
                writer = self._writers[key] = _StateWriter(self, key)
            try:
                await writer.write()
            except KafkaApiError as exc:
                errors[key] = persister_error(exc.error)
        return errors

    def persist_in_background(self, keys: Iterable[ShareKey]) -> None:
        task = asyncio.ensure_future(self.persist(list(keys)))
        task.add_done_callback(lambda f: f.cancelled() or f.exception() is None
                               or log.warning("Writing share-group state failed: %s", f.exception()))

    async def _write_state(self, key: ShareKey) -> None:
        share_partition = self.partitions.get(key)
        if share_partition is None:
            return
        group_id, topic, partition = key
        leader, _log = self.replica_manager.leader_partition_and_log(topic, partition)
        try:
            await self.persister.write(group_id, self.replica_manager.metadata_cache.topic_id(topic), partition,
                                       share_partition.state_epoch, leader.leader_epoch, share_partition.start_offset,
                                       share_partition.state_batches())
        except KafkaApiError as exc:
            if exc.error is Errors.FENCED_STATE_EPOCH and self.partitions.get(key) is share_partition:
                del self.partitions[key]  # its offsets were altered or deleted: the next fetch reloads
            raise

    def _start_offset(self, group_id: str, tp_log) -> int:  # type: ignore[no-untyped-def]
        reset = self._group_config(group_id, "share.auto.offset.reset")
        if reset == EARLIEST:
            return tp_log.log_start_offset
        if reset.startswith(BY_DURATION):
            found = tp_log.fetch_offset_by_timestamp(now_ms() - duration_ms(reset[len(BY_DURATION):]))
            return tp_log.high_watermark if found is None else found.offset
        return tp_log.high_watermark

    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, _leader_epoch: int) -> None:
        """A partition led anew reloads its share-partitions from the persisted state; one no
        longer led drops them (the new leader owns them)."""
        for key in [k for k in self.partitions if k[1] == topic and k[2] == partition]:
            del self.partitions[key]
            self._writers.pop(key, None)

    # --- fetch ---------------------------------------------------------------------------------

    def acquire(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition], max_bytes: int,
                max_records: int, read_committed: bool) -> dict[TopicPartition, ShareFetchPartitionResult]:
        """Acquire records of ``partitions`` for the member; a partition with nothing has no records."""
        now = now_ms()
        results: dict[TopicPartition, ShareFetchPartitionResult] = {}
        remaining_records, remaining_bytes = max_records, max_bytes
        for tp in partitions:
            try:
                share_partition = self._share_partition(group_id, *tp)
            except KafkaApiError as exc:
                results[tp] = ShareFetchPartitionResult(exc.error)
                continue
            share_partition.expire_locks(now)
            if remaining_records <= 0 or remaining_bytes <= 0 or not share_partition.can_acquire():
                results[tp] = ShareFetchPartitionResult()
                continue
            result = results[tp] = self._acquire_partition(share_partition, member_id, tp, remaining_bytes,
                                                           remaining_records, read_committed, now)
            remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            remaining_bytes -= len(result.records)
        return results

    def _acquire_partition(self, share_partition: SharePartition, member_id: str, tp: TopicPartition,
                           max_bytes: int, max_records: int, read_committed: bool,
                           now: int) -> ShareFetchPartitionResult:
        isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
        spec = FetchPartitionSpec(share_partition.fetch_offset(), max_bytes)
        read: PartitionReadResult = self.replica_manager.read_from_local_log({tp: spec}, -1, isolation, max_bytes)[tp]
        if read.error:
            return ShareFetchPartitionResult(read.error)
        records = read.records if isinstance(read.records, bytes) else read.records.read_bytes()
        if not records:
            return ShareFetchPartitionResult()
        positions = list(iter_batch_positions(records))
        fetched = []
        aborted = read.aborted_transactions or []
        for pos, _size in positions:
            header = read_batch_header(records, pos)
            last = header.base_offset + header.last_offset_delta
            skip = header.is_control or (read_committed and header.is_transactional and any(
                txn.producer_id == header.producer_id and txn.first_offset <= header.base_offset <= txn.last_offset
                for txn in aborted))
            fetched.append(FetchedBatch(header.base_offset, last, skip))
        acquired = share_partition.acquire(member_id, fetched, max_records, now)
        parts = []
        for (pos, size), batch in zip(positions, fetched):
            if any(a.first_offset <= batch.last_offset and batch.base_offset <= a.last_offset for a in acquired):
                parts.append(records[pos:pos + size])
        return ShareFetchPartitionResult(records=b"".join(parts), acquired=acquired)

    # --- acknowledgement and release ------------------------------------------------------------

    def acknowledge(self, group_id: str, member_id: str,
                    acknowledgements: dict[TopicPartition, list[tuple[int, int, list[int]]]]
                    ) -> dict[TopicPartition, Errors]:
        now = now_ms()
        errors = {}
        for tp, batches in acknowledgements.items():
            share_partition = self.partitions.get((group_id, *tp))
            if share_partition is None:
                try:
                    self.replica_manager.leader_partition_and_log(*tp)
                    errors[tp] = Errors.INVALID_RECORD_STATE  # led here, but nothing was acquired
                except KafkaApiError as exc:
                    errors[tp] = exc.error
                continue
            share_partition.config = self._partition_config(group_id)  # RENEW locks for the group's duration
            share_partition.expire_locks(now)
            errors[tp] = share_partition.acknowledge(member_id, batches, now)
        return errors

    def release_member(self, group_id: str, member_id: str) -> list[ShareKey]:
        """The member was fenced or closed its session: its records become available. The
        share-partitions that changed, to be written back."""
        return [key for key, share_partition in self.partitions.items()
                if key[0] == group_id and share_partition.release_member(member_id)]

    def expire_locks(self) -> int:
        """Release the records whose locks ran out, and write the changed share-partitions back."""
        now = now_ms()
        changed = [key for key, share_partition in self.partitions.items() if share_partition.expire_locks(now)]
        if changed:
            self.persist_in_background(changed)
        return len(changed)

    async def delete_group(self, group_id: str, assigned: Iterable[tuple[str, int]]) -> None:
        """Forget a deleted group's share-partitions: those held here and every one it was ever
        assigned, wherever led, at their share coordinators (DeleteShareGroupState, as Kafka's)."""
        held = {(topic, partition) for group, topic, partition in self.partitions if group == group_id}
        for topic, partition in sorted(held | set(assigned)):
            try:
                await self.delete_state(group_id, topic, partition)
            except KafkaApiError as exc:
                log.warning("Deleting the share-group state of %s-%d for %s failed: %s", topic, partition,
                            group_id, exc.error.name)

    async def delete_state(self, group_id: str, topic: str, partition: int) -> None:
        """Forget one share-partition here and at its share coordinator (DeleteShareGroupOffsets)."""
        self.partitions.pop((group_id, topic, partition), None)
        self._writers.pop((group_id, topic, partition), None)
        await self.persister.delete(group_id, self.replica_manager.metadata_cache.topic_id(topic), partition)

    async def alter_start_offset(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        """Start one share-partition over (AlterShareGroupOffsets): a new state epoch at the share
        coordinator; the leader drops what it holds and reloads on the next fetch."""
        self.partitions.pop((group_id, topic, partition), None)
        self._writers.pop((group_id, topic, partition), None)
        await self.persister.initialize(group_id, self.replica_manager.metadata_cache.topic_id(topic), partition,
                                        start_offset)


class _StateWriter:
    """Writes one share-partition's state in order: a write asked for while another is in flight
    waits for it, and is done already if a write that started after it was asked for succeeded."""

    def __init__(self, manager: SharePartitionManager, key: ShareKey) -> None:
        self.manager = manager
        self.key = key
        self.wanted = 0
        self.written = 0
        self._lock = asyncio.Lock()

    async def write(self) -> None:
        self.wanted += 1
        target = self.wanted
        async with self._lock:
            if self.written >= target:
                return
            covering = self.wanted  # this write carries every change asked for until now
            await self.manager._write_state(self.key)
            self.written = covering
