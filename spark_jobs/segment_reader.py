"""Executor side: one split's byte range of a segment turned into Arrow record batches.

Entries are validated (framing and CRC) and decoded by protocol.records; the reader only
decides, per entry, whether it is wanted (control batches never are; aborted transactional
batches are not under read_committed; offset/timestamp windows) and lays records out as
columns. A corrupt entry stops the read with its file and byte position unless the source
was asked to ``skipCorrupt``; a torn entry at the very end of a partition's last segment is a
write the broker never finished and is ignored, as Kafka's log recovery would truncate it.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import sys
from collections.abc import Iterator
from typing import Optional

import pyarrow as pa

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import LOG_OVERHEAD
from protocol.records.compression import CompressionType
from protocol.records.log_entry import LogEntryHeader, decode_entry_records, read_log_entry, validate_log_entry
from protocol.records.record import Record
from spark_jobs.planner import AbortedRange, SegmentSplit
from spark_jobs.read_options import ReadOptions

ROWS_PER_ARROW_BATCH = 16384
NO_TIMESTAMP = -1

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(HEADER_TYPE)),
        ("producerId", pa.int64()),
        ("leaderEpoch", pa.int32()),
        ("compression", pa.string()),
        ("batchBaseOffset", pa.int64()),
        ("batchSizeBytes", pa.int32()),
    ]
)
SPARK_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>, producerId long, "
    "leaderEpoch int, compression string, batchBaseOffset long, batchSizeBytes int"
)
CODEC_NAMES = {codec.value: codec.name.lower() for codec in CompressionType}

_SIZE_FIELD = struct.Struct(">i")


class CorruptSegmentError(Exception):
    """A segment entry that fails validation; names the file and byte position."""

    def __init__(self, path: str, position: int, detail: str) -> None:
        super().__init__(
            f"corrupt log segment {path} at byte position {position}: {detail} "
            "(run spark_jobs.verify for a full report, or read with option skipCorrupt=true to skip it)"
        )
        self.path = path
        self.position = position


class _Columns:
    """Column lists for the rows of one Arrow batch; filled per log entry, not per field."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.keys: list[Optional[bytes]] = []
        self.values: list[Optional[bytes]] = []
        self.offsets: list[int] = []
        self.timestamps: list[Optional[int]] = []
        self.headers: list[list[tuple[str, Optional[bytes]]]] = []
        # Entry-level columns, one tuple per log entry, expanded to rows at flush:
        # (record count, timestampType, producerId, leaderEpoch, codec name, batchBaseOffset, batchSizeBytes)
        self.per_entry: list[tuple[int, int, int, int, str, int, int]] = []

    def add(self, header: LogEntryHeader, records: list[Record], base_offset: int) -> None:
        count = len(records)
        self.keys += [r.key for r in records]
        self.values += [r.value for r in records]
        self.offsets += [r.offset for r in records]
        self.timestamps += [None if r.timestamp == NO_TIMESTAMP else r.timestamp * 1000 for r in records]
        self.headers += [r.headers for r in records]
        self.per_entry.append(
            (
                count,
                header.timestamp_type,
                header.producer_id,
                header.partition_leader_epoch,
                CODEC_NAMES.get(header.compression, str(header.compression)),
                base_offset,
                header.size,
            )
        )
        self.rows += count

    def _repeat(self, field: int) -> list:
        out: list = []
        for entry in self.per_entry:
            out += [entry[field]] * entry[0]
        return out

    def flush(self) -> pa.RecordBatch:
        rows = self.rows
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.array([self.topic] * rows, pa.string()),
                pa.array([self.partition] * rows, pa.int32()),
                pa.array(self.offsets, pa.int64()),
                pa.array(self.timestamps, ARROW_SCHEMA.field("timestamp").type),
                pa.array(self._repeat(1), pa.int32()),
                pa.array(self.headers, ARROW_SCHEMA.field("headers").type),
                pa.array(self._repeat(2), pa.int64()),
                pa.array(self._repeat(3), pa.int32()),
                pa.array(self._repeat(4), pa.string()),
                pa.array(self._repeat(5), pa.int64()),
                pa.array(self._repeat(6), pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch


class _AbortedTransactions:
    """Per producer, the offset ranges of aborted transactions (first data offset .. ABORT marker)."""

    def __init__(self, ranges: tuple[AbortedRange, ...]) -> None:
        by_producer: dict[int, list[tuple[int, int]]] = {}
        for producer_id, first, last in ranges:
            by_producer.setdefault(producer_id, []).append((first, last))
        self._firsts = {p: [r[0] for r in sorted(rs)] for p, rs in by_producer.items()}
        self._lasts = {p: [r[1] for r in sorted(rs)] for p, rs in by_producer.items()}

    def contains(self, header: LogEntryHeader) -> bool:
        firsts = self._firsts.get(header.producer_id)
        if firsts is None:
            return False
        slot = bisect.bisect_right(firsts, header.base_offset) - 1
        return slot >= 0 and header.base_offset <= self._lasts[header.producer_id][slot]


def _is_torn_tail(buf: mmap.mmap, pos: int) -> bool:
    """Whether the entry at ``pos`` runs past the end of the file (an unfinished write)."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return True
    length = _SIZE_FIELD.unpack_from(buf, pos + 8)[0]
    return length >= 0 and pos + LOG_OVERHEAD + length > len(buf)


class SplitReader:
    """Reads one SegmentSplit under the source's options."""

    def __init__(self, split: SegmentSplit, options: ReadOptions) -> None:
        self.split = split
        self.options = options
        self.aborted = _AbortedTransactions(split.aborted)

    def _corrupt(self, position: int, detail: str) -> None:
        if not self.options.skip_corrupt:
            raise CorruptSegmentError(self.split.path, position, detail)
        print(f"kafka-log: skipping corrupt entry in {self.split.path} at byte {position}: {detail}", file=sys.stderr)

    def _wanted(self, header: LogEntryHeader) -> bool:
        if header.is_control:
            return False
        if self.split.min_offset is not None and header.last_offset < self.split.min_offset:
            return False
        start_ts = self.options.starting_timestamp
        if start_ts is not None and NO_TIMESTAMP < header.max_timestamp < start_ts:
            return False
        return not (header.is_transactional and self.aborted.contains(header))

    def _window(self, records: list[Record]) -> list[Record]:
        low, high = self.split.min_offset, self.split.max_offset
        start_ts, end_ts = self.options.starting_timestamp, self.options.ending_timestamp
        if low is not None or high is not None:
            records = [r for r in records if (low is None or r.offset >= low) and (high is None or r.offset < high)]
        if start_ts is not None:
            records = [r for r in records if r.timestamp >= start_ts]
        if end_ts is not None:
            records = [r for r in records if r.timestamp < end_ts]
        return records

    def read(self) -> Iterator[pa.RecordBatch]:
        split = self.split
        if os.path.getsize(split.path) == 0:
            return
        with open(split.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            yield from self._read(buf)

    def _read(self, buf: mmap.mmap) -> Iterator[pa.RecordBatch]:
        split = self.split
        columns = _Columns(split.topic, split.partition)
        end = min(split.end, len(buf))
        pos = split.start
        while pos < end:
            if _is_torn_tail(buf, pos):
                # Any split of the log's last segment may meet it: the file may have grown since
                # planning while this entry is still being written.
                if split.is_last_segment:
                    break
                self._corrupt(pos, "entry runs past the end of the file")
                break
            try:
                header = validate_log_entry(buf, pos)
                next_pos = pos + header.size
                if self._wanted(header):
                    records = decode_entry_records(buf, pos)
                    if split.max_offset is not None and records and records[0].offset >= split.max_offset:
                        break
                    records = self._window(records)
                    if records:
                        base = header.base_offset if header.magic == 2 else records[0].offset
                        columns.add(header, records, base)
            except CorruptRecordError as exc:
                self._corrupt(pos, str(exc))
                next_pos = self._resume_after(buf, pos)
                if next_pos is None:
                    break
            pos = next_pos
            if columns.rows >= ROWS_PER_ARROW_BATCH:
                yield columns.flush()
        if columns.rows:
            yield columns.flush()

    @staticmethod
    def _resume_after(buf: mmap.mmap, pos: int) -> Optional[int]:
        """Where reading continues after a corrupt entry: past it if its framing holds, else nowhere."""
        try:
            return pos + read_log_entry(buf, pos).size
        except CorruptRecordError:
            return None
