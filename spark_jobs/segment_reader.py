"""Executor side: one split's byte range of a segment turned into Arrow record batches.

Entries are validated (framing and CRC) and decoded, large v2 batches as columns
(record_columns), others record by record (protocol.records); the reader only decides, per
entry, whether it is wanted (control batches never are; aborted transactional
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
from typing import Optional, Union

import numpy as np
import pyarrow as pa

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import LOG_OVERHEAD
from protocol.records.compression import CompressionType
from protocol.records.log_entry import LogEntryHeader, decode_entry_records, read_log_entry, validate_log_entry
from protocol.records.record import Record, batch_record_data, decode_records
from spark_jobs.planner import AbortedRange, SegmentSplit
from spark_jobs.read_options import ReadOptions
from spark_jobs.record_columns import NO_TIMESTAMP, TIMESTAMP_TYPE, RecordColumns, decode_columns

# An Arrow batch is flushed once it holds this many rows: a Kafka batch at least this large goes
# to Spark on its own, without being copied again into a concatenation; small ones are gathered.
ROWS_PER_ARROW_BATCH = 2048
# Smaller v2 batches are decoded record by record: numpy's per-call cost would outweigh its gain.
MIN_COLUMNAR_RECORDS = 32

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_TYPE)
_EMPTY_HEADERS = pa.array([], HEADER_TYPE)
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP_TYPE),
        ("timestampType", pa.int32()),
        ("headers", HEADERS_TYPE),
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
    """The rows of one Arrow batch, gathered per log entry: large v2 batches as RecordColumns,
    other entries as decoded Records; entry-level columns are expanded to rows at flush."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        # Per-record columns (key, value, offset, timestamp, headers), one tuple of arrays per chunk.
        self.chunks: list[tuple[pa.Array, ...]] = []
        self.records: list[Record] = []  # decoded records not yet in a chunk
        # One tuple per log entry: (record count, timestampType, producerId, leaderEpoch,
        # codec name, batchBaseOffset, batchSizeBytes)
        self.per_entry: list[tuple[int, int, int, int, str, int, int]] = []

    def add(self, header: LogEntryHeader, rows: Union[RecordColumns, list[Record]], base_offset: int) -> None:
        if isinstance(rows, RecordColumns):
            self._close_records()
            self.chunks.append((rows.keys, rows.values, pa.array(rows.offsets), rows.arrow_timestamps(),
                                _no_headers(len(rows))))
        else:
            self.records += rows
        self.per_entry.append(
            (
                len(rows),
                header.timestamp_type,
                header.producer_id,
                header.partition_leader_epoch,
                CODEC_NAMES.get(header.compression, str(header.compression)),
                base_offset,
                header.size,
            )
        )
        self.rows += len(rows)

    def _close_records(self) -> None:
        records = self.records
        if not records:
            return
        self.chunks.append(
            (
                pa.array([r.key for r in records], pa.binary()),
                pa.array([r.value for r in records], pa.binary()),
                pa.array([r.offset for r in records], pa.int64()),
                pa.array([None if r.timestamp == NO_TIMESTAMP else r.timestamp * 1000 for r in records],
                         TIMESTAMP_TYPE),
                pa.array([r.headers for r in records], HEADERS_TYPE),
            )
        )
        self.records = []

    def flush(self) -> pa.RecordBatch:
        self._close_records()
        rows = self.rows
        key, value, offset, timestamp, headers = (
            self.chunks[0] if len(self.chunks) == 1 else [pa.concat_arrays(c) for c in zip(*self.chunks)]
        )
        entry_of_row = pa.array(np.repeat(np.arange(len(self.per_entry), dtype=np.int32),
                                          [entry[0] for entry in self.per_entry]))
        per_entry = list(zip(*self.per_entry))

        def entry_column(field: int, kind: pa.DataType) -> pa.Array:
            return pa.array(per_entry[field], kind).take(entry_of_row)

        batch = pa.RecordBatch.from_arrays(
            [
                key,
                value,
                pa.repeat(pa.scalar(self.topic, pa.string()), rows),
                pa.repeat(pa.scalar(self.partition, pa.int32()), rows),
                offset,
                timestamp,
                entry_column(1, pa.int32()),
                headers,
                entry_column(2, pa.int64()),
                entry_column(3, pa.int32()),
                entry_column(4, pa.string()),
                entry_column(5, pa.int64()),
                entry_column(6, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch


def _no_headers(count: int) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, np.int32)), _EMPTY_HEADERS, type=HEADERS_TYPE)


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


def _first_offset(rows: Union[RecordColumns, list[Record]]) -> int:
    return int(rows.offsets[0]) if isinstance(rows, RecordColumns) else rows[0].offset


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

    @staticmethod
    def _decode(buf: mmap.mmap, pos: int, header: LogEntryHeader) -> Union[RecordColumns, list[Record]]:
        """The entry's records: as columns when it is a v2 batch big enough to pay for them."""
        if header.magic != 2 or header.record_count < MIN_COLUMNAR_RECORDS:
            return decode_entry_records(buf, pos)
        data = batch_record_data(buf, pos)
        log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
        args = (data, header.record_count, header.base_offset, header.base_timestamp, log_append_time)
        columns = decode_columns(*args)
        return decode_records(*args) if columns is None else columns

    def _window(self, rows: Union[RecordColumns, list[Record]]) -> Union[RecordColumns, list[Record]]:
        """The rows inside the split's offset window and the source's timestamp window."""
        low, high = self.split.min_offset, self.split.max_offset
        start_ts, end_ts = self.options.starting_timestamp, self.options.ending_timestamp
        if low is None and high is None and start_ts is None and end_ts is None:
            return rows
        if isinstance(rows, RecordColumns):
            offsets, timestamps = rows.offsets, rows.timestamps
        else:
            offsets = np.array([r.offset for r in rows], np.int64)
            timestamps = np.array([r.timestamp for r in rows], np.int64)
        wanted = np.ones(len(offsets), np.bool_)
        for bound, values, below in ((low, offsets, False), (high, offsets, True),
                                     (start_ts, timestamps, False), (end_ts, timestamps, True)):
            if bound is not None:
                wanted &= values < bound if below else values >= bound
        if wanted.all():
            return rows
        if isinstance(rows, RecordColumns):
            return rows.filter(wanted)
        return [r for r, keep in zip(rows, wanted) if keep]

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
                    rows = self._decode(buf, pos, header)
                    if split.max_offset is not None and len(rows) and _first_offset(rows) >= split.max_offset:
                        break
                    rows = self._window(rows)
                    if len(rows):
                        columns.add(header, rows, header.base_offset if header.magic == 2 else _first_offset(rows))
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
