"""SharePartitionManager: the share-partitions this broker leads, and share fetches over them.

As Kafka's SharePartitionManager: one SharePartition per (share group, topic partition) led here,
created on the first fetch at the start offset ``share.auto.offset.reset`` picks (``latest``,
``earliest`` or ``by_duration:<ISO-8601 duration>``). A fetch reads each partition from its first
available offset, acquires what it can for the member and returns the log batches that hold the
acquired records with their ranges; with ``read_committed`` the batches of aborted transactions
(found through the transaction index) and control batches are archived, never delivered.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.replica_manager import FetchPartitionSpec, PartitionReadResult, ReplicaManager
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
READ_COMMITTED = "read_committed"
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def duration_ms(text: str) -> int:
    """An ISO-8601 duration as ``by_duration:`` takes it (PnDTnHnMn.nS), in milliseconds."""
    match = _DURATION.match(text)
    if match is None or text in ("P", "PT"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration")
    days, hours, minutes, seconds = match.groups()
    return int(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
               + float(seconds or 0) * 1000)


@dataclass
class ShareFetchPartitionResult:
    error: Errors = Errors.NONE
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


def now_ms() -> int:
    return int(time.time() * 1000)


class SharePartitionManager:
    def __init__(self, replica_manager: ReplicaManager, config: SharePartitionConfig) -> None:
        self.replica_manager = replica_manager
        self.config = config
        self.partitions: dict[ShareKey, SharePartition] = {}
        # Per-group share.auto.offset.reset and share.isolation.level (Kafka's GroupConfig); absent: defaults.
        self.group_configs: dict[str, dict[str, str]] = {}

    def read_committed(self, group_id: str) -> bool:
        return self.group_configs.get(group_id, {}).get("share.isolation.level") == READ_COMMITTED

    # --- share partitions ----------------------------------------------------------------------

    def _share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition:
        key = (group_id, topic, partition)
        found = self.partitions.get(key)
        if found is None:
            _leader, tp_log = self.replica_manager.leader_partition_and_log(topic, partition)
            found = self.partitions[key] = SharePartition(self._start_offset(group_id, tp_log), self.config)
        return found

    def _start_offset(self, group_id: str, tp_log) -> int:  # type: ignore[no-untyped-def]
        reset = self.group_configs.get(group_id, {}).get("share.auto.offset.reset", LATEST)
        if reset == EARLIEST:
            return tp_log.log_start_offset
        if reset.startswith(BY_DURATION):
            found = tp_log.fetch_offset_by_timestamp(now_ms() - duration_ms(reset[len(BY_DURATION):]))
            return tp_log.high_watermark if found is None else found.offset
        return tp_log.high_watermark

    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, _leader_epoch: int) -> None:
        """A partition no longer led here drops its share-partitions (the new leader owns them)."""
        if not is_leader:
            for key in [k for k in self.partitions if k[1] == topic and k[2] == partition]:
                del self.partitions[key]

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
            share_partition.expire_locks(now)
            errors[tp] = share_partition.acknowledge(member_id, batches, now)
        return errors

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member left, was fenced or closed its session: its records become available."""
        for (group, _topic, _partition), share_partition in self.partitions.items():
            if group == group_id:
                share_partition.release_member(member_id)

    def expire_locks(self) -> int:
        now = now_ms()
        return sum(share_partition.expire_locks(now) for share_partition in self.partitions.values())

    def delete_group(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
