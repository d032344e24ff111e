"""Broker-like log directories for the spark_jobs tests, written through storage.log.Log.

`write_log_dir` lays out a fixed mix: every codec, keys, headers, tombstones, an idempotent
producer, committed and aborted transactions, LogAppendTime and legacy v0/v1 messages, across
several segments, and returns what a reader must return (control records excluded).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from protocol.records.builder import LOG_APPEND_TIME, RecordBatchBuilder, build_control_batch
from protocol.records.compression import CompressionType
from protocol.records.control import ControlRecordType, EndTransactionMarker
from storage.checkpoints import OffsetCheckpointFile
from storage.log import Log
from storage.log_config import LogConfig
from storage.producer_state import SENTINEL_GUARD, AppendOrigin

BASE_TS = 1_700_000_000_000
SMALL_SEGMENTS = LogConfig(segment_bytes=2500, index_interval_bytes=300, segment_index_bytes=4096)


@dataclass(frozen=True)
class Expected:
    topic: str
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: Optional[int]
    timestamp_type: int
    headers: tuple[tuple[str, Optional[bytes]], ...] = ()
    aborted: bool = False  # transactional data a read_committed reader must drop
    compression: str = "none"


@dataclass
class PartitionWriter:
    """Appends batches to one Log and keeps the rows a reader should see."""

    log: Log
    topic: str
    partition: int
    expected: list[Expected] = field(default_factory=list)

    def append(
        self,
        rows: list[tuple[Optional[bytes], Optional[bytes], tuple[tuple[str, Optional[bytes]], ...]]],
        *,
        codec: int = CompressionType.NONE,
        producer: tuple[int, int, int] | None = None,  # id, epoch, base sequence
        transactional: bool = False,
        aborted: bool = False,
        log_append_time: Optional[int] = None,
    ) -> None:
        offset = self.log.log_end_offset
        pid, epoch, seq = producer or (-1, -1, -1)
        builder = RecordBatchBuilder(
            compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
            is_transactional=transactional,
            timestamp_type=LOG_APPEND_TIME if log_append_time is not None else 0,
            log_append_time=log_append_time if log_append_time is not None else -1,
        )
        for i, (key, value, headers) in enumerate(rows):
            ts = BASE_TS + (offset + i) * 1000
            builder.append(ts, key, value, headers)
            self.expected.append(
                Expected(self.topic, self.partition, offset + i, key, value,
                         log_append_time if log_append_time is not None else ts,
                         1 if log_append_time is not None else 0, headers, aborted,
                         CompressionType(codec).name.lower())
            )
        # a transactional write is preceded by its (here: successful) verification with the coordinator
        guard = self.log.maybe_start_transaction_verification(pid, seq, epoch) if transactional else SENTINEL_GUARD
        self.log.append_as_leader(builder.build(), 0, verification_guard=guard)

    def marker(self, producer_id: int, epoch: int, commit: bool) -> None:
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        batch = build_control_batch(EndTransactionMarker(kind, 0), producer_id=producer_id, producer_epoch=epoch,
                                    timestamp=BASE_TS)
        self.log.append_as_leader(batch, 0, origin=AppendOrigin.COORDINATOR)

    def legacy(self, magic: int, codec: int, rows: list[tuple[Optional[bytes], Optional[bytes]]]) -> None:
        offset = self.log.log_end_offset
        builder = RecordBatchBuilder(magic=magic, compression=codec, base_offset=offset)
        for i, (key, value) in enumerate(rows):
            ts = BASE_TS + (offset + i) * 1000
            builder.append(ts, key, value)
            self.expected.append(
                Expected(self.topic, self.partition, offset + i, key, value, ts if magic else None,
                         0 if magic else -1, (), False, CompressionType(codec).name.lower())
            )
        self.log.append_as_follower(builder.build())


def _rows(prefix: str, count: int, *, headers: bool = False, tombstone_every: int = 0):
    out = []
    for i in range(count):
        key = f"{prefix}-key-{i % 7}".encode() if i % 5 else None
        value = None if tombstone_every and i % tombstone_every == 0 else f"{prefix}-value-{i}-{'x' * (i % 40)}".encode()
        hdrs = ((f"h{i % 3}", f"hv{i}".encode()), ("empty", None)) if headers else ()
        out.append((key, value, hdrs))
    return out


def write_log_dir(log_dir: str, config: LogConfig = SMALL_SEGMENTS) -> list[Expected]:
    """Topics ``events`` (2 partitions), ``txn`` (1) and ``legacy`` (1); returns every data record."""
    expected: list[Expected] = []
    high_watermarks = {}
    for topic, partition in (("events", 0), ("events", 1), ("txn", 0), ("legacy", 0)):
        log = Log(os.path.join(log_dir, f"{topic}-{partition}"), config)
        writer = PartitionWriter(log, topic, partition)
        if topic == "events":
            for round_ in range(6):
                for codec in CompressionType:
                    writer.append(_rows(f"{topic}{partition}r{round_}c{codec}", 6 + codec,
                                        headers=bool(codec % 2), tombstone_every=4), codec=codec)
            seq = 0
            for _ in range(4):
                writer.append(_rows("idem", 5), producer=(1000 + partition, 0, seq), codec=CompressionType.LZ4)
                seq += 5
            writer.append(_rows("appendtime", 3, headers=True), log_append_time=BASE_TS + 99_000_000)
        elif topic == "txn":
            seqs = {2000: 0, 2001: 0}
            for round_ in range(5):
                for pid in (2000, 2001):
                    commit = (round_ + pid) % 2 == 0
                    for _ in range(2):
                        writer.append(_rows(f"txn{pid}r{round_}", 4, headers=True), producer=(pid, 0, seqs[pid]),
                                      transactional=True, aborted=not commit, codec=CompressionType.ZSTD)
                        seqs[pid] += 4
                for pid in (2000, 2001):
                    writer.marker(pid, 0, commit=(round_ + pid) % 2 == 0)
            writer.append(_rows("plain", 5))
        else:
            writer.legacy(0, CompressionType.NONE, [(b"k0", b"v0"), (None, b"v1")])
            writer.legacy(0, CompressionType.GZIP, [(b"k2", b"v2"), (b"k3", None)])
            writer.legacy(1, CompressionType.SNAPPY, [(b"k4", b"v4"), (b"k5", b"v5"), (None, b"v6")])
            writer.legacy(1, CompressionType.LZ4, [(b"k7", b"v7")])
            writer.legacy(1, CompressionType.NONE, [(b"k8", b"v8")])
            writer.append(_rows("after-legacy", 4))
        high_watermarks[(topic, partition)] = log.log_end_offset
        log.close()
        expected += writer.expected
    OffsetCheckpointFile(os.path.join(log_dir, "replication-offset-checkpoint")).write(high_watermarks)
    return expected


def open_transaction_tail(log_dir: str, topic: str = "txn", partition: int = 0) -> list[Expected]:
    """Appends a transaction without its marker (still open); returns its rows."""
    log = Log(os.path.join(log_dir, f"{topic}-{partition}"), SMALL_SEGMENTS)
    writer = PartitionWriter(log, topic, partition)
    writer.append(_rows("open", 3), producer=(3000, 0, 0), transactional=True)
    log.close()
    return writer.expected
