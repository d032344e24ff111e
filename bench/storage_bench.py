"""Storage benchmark: log append/read throughput next to the raw disk, and recovery time.

Run from the repository root:

    python bench/storage_bench.py [--dir DIR] [--size-mb 256] [--recovery-mb 128] [--repeat 5]

Appends whole 16 KiB and 1 MiB batches through Log.append_as_leader (CRC check, offset
assignment, producer-state and index work included) and compares them with what a simple
writer does with the same bytes: sequential os.pwrite calls of the same buffer, the same
count and so the same total bytes and write sizes, to a new file in the same directory,
interleaved with the log runs (alternating which goes first), each starting after os.sync().
Three measures, each a ratio of medians:

- buffered: wall clock until the last write returns (the page cache; Python's fixed cost
  per append shows here),
- buffered CPU: the same span in thread CPU time, which other processes on a loaded
  machine do not inflate,
- synced: wall clock including the final fsync (Log.flush on the log side; the disk's
  write-back dominates).

It also prints the CPU cost per write in microseconds on both sides: their difference is the
log's fixed per-append cost, and the budget it would need to reach 80% of the raw write. Next to
them, the floor: the CPU cost of a bare loop doing only what a validating append cannot skip
(CRC check, offset patch, pwrite, index entry), the bound for any Python log at that size; and the
flat append: one function doing the work the log's append does for such a batch, without its layers
(what flattening Log -> LogSegment -> FileRecords/indexes could gain at most).
Reads walk the log with Log.read (whole-batch slices) and then copy the bytes out, the
fallback path of the network layer. Recovery writes an unflushed log, drops it without
closing it, and times the reopen that re-validates every batch.
"""

from __future__ import annotations

import argparse
import logging
import mmap
import os
import shlex
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crc32c import crc32c  # noqa: E402

from bench import bench_json  # noqa: E402
from protocol.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, LAST_OFFSET_DELTA_OFFSET  # noqa: E402
from protocol.records.builder import RecordBatchBuilder  # noqa: E402
from storage.log import FetchIsolation, Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402

MIB = 1 << 20
ZERO_OFFSET = bytes(8)


def make_batch(size: int) -> bytearray:
    """One uncompressed v2 batch of about ``size`` bytes (1 KiB records)."""
    builder = RecordBatchBuilder()
    value = os.urandom(1000)
    now = int(time.time() * 1000)
    while builder.uncompressed_size + 1100 < size:
        builder.append(now, b"key", value)
    return builder.build()


class WriteResult(NamedTuple):
    buffered: float  # MB/s until the last write returned (page cache)
    buffered_cpu: float  # MB/s of thread CPU time over the same span
    synced: float  # MB/s including the final fsync (the disk)
    cpu_us_per_write: float  # thread CPU microseconds per write (or append)


class _Clock:
    """Wall and thread-CPU time of the write loop, then wall time to the end of the fsync."""

    def __init__(self) -> None:
        self.start, self.start_cpu = time.perf_counter(), time.thread_time()

    def writes_done(self) -> None:
        self.written_at, self.written_cpu = time.perf_counter(), time.thread_time()

    def result(self, written: int, count: int) -> WriteResult:
        synced_at = time.perf_counter()
        cpu = self.written_cpu - self.start_cpu
        return WriteResult(
            written / MIB / (self.written_at - self.start), written / MIB / cpu,
            written / MIB / (synced_at - self.start), cpu / count * 1e6,
        )


def raw_write(directory: str, data: bytearray, count: int) -> WriteResult:
    """The disk's baseline: the same buffer, the same number of pwrites to one new file, one fsync."""
    path = os.path.join(directory, "raw.log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.sync()  # start from a clean page cache, as the log runs do
    clock = _Clock()
    position = 0
    for _ in range(count):
        position += os.pwrite(fd, data, position)
    clock.writes_done()
    os.fsync(fd)
    result = clock.result(position, count)
    os.close(fd)
    os.remove(path)
    return result


def log_append(directory: str, batch: bytearray, count: int) -> tuple[WriteResult, Log]:
    """``count`` appends of ``batch`` through Log.append_as_leader, then Log.flush (one fsync per file)."""
    log = Log(os.path.join(directory, f"bench-{len(batch)}-0"), LogConfig())
    os.sync()
    clock = _Clock()
    for _ in range(count):
        batch[0:8] = ZERO_OFFSET  # the buffer is reused: producers send base offset 0
        log.append_as_leader(batch, leader_epoch=0)
    clock.writes_done()
    log.flush()
    return clock.result(count * len(batch), count), log


_CRC = struct.Struct(">I")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_INDEX_ENTRY = struct.Struct(">ii")


def floor_cpu_us(directory: str, batch: bytearray, count: int) -> float:
    """Thread-CPU us per write of the least any Python append that validates must do: read the
    CRC and lastOffsetDelta, check the CRC, patch offset and epoch, pwrite, write an index entry.
    No lock, roll check, producer state or result object: a bound, not an implementation."""
    path = os.path.join(directory, "floor.log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    index_fd = os.open(path + ".index", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(index_fd, 8 * count)
    index = mmap.mmap(index_fd, 8 * count)
    view = memoryview(batch)
    os.sync()
    start = time.thread_time()
    position = offset = 0
    for slot in range(count):
        if crc32c(view[ATTRIBUTES_OFFSET:]) != _CRC.unpack_from(batch, CRC_OFFSET)[0]:
            raise ValueError("CRC mismatch")
        _OFFSET_LENGTH_EPOCH.pack_into(batch, 0, offset, len(batch) - 12, 0)
        written = os.pwrite(fd, batch, position)
        _INDEX_ENTRY.pack_into(index, slot * 8, offset, position)
        offset += _LAST_OFFSET_DELTA.unpack_from(batch, LAST_OFFSET_DELTA_OFFSET)[0] + 1
        position += written
    cpu = time.thread_time() - start
    view.release()
    index.close()
    for handle, name in ((fd, path), (index_fd, path + ".index")):
        os.close(handle)
        os.remove(name)
    return cpu / count * 1e6


_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # a v2 batch's 61 header bytes
_TIME_INDEX_ENTRY = struct.Struct(">qi")


def flat_append_cpu_us(directory: str, batch: bytearray, count: int) -> float:
    """Thread-CPU us per append of one function doing what ``Log.append_as_leader`` does for a v2
    batch without producer id, with the log's state in locals and one object: header parse and
    framing, CRC, the lock, the moved/roll/flush checks, offset and epoch patch, pwrite, sparse
    offset and time index entries, read-position and verified-range bookkeeping, the leader epoch
    check, a result object. A bound for flattening the layers, not an implementation."""
    path = os.path.join(directory, "flat.log")
    files = [os.open(path + suffix, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for suffix in ("", ".index", ".timeindex")]
    os.ftruncate(files[1], 8 * count + 8)
    os.ftruncate(files[2], 12 * count + 12)
    offset_index, time_index = mmap.mmap(files[1], 8 * count + 8), mmap.mmap(files[2], 12 * count + 12)

    class Result:
        __slots__ = ("first_offset", "last_offset", "max_timestamp", "valid_bytes", "num_records", "completed")

        def __init__(self, first: int, last: int, max_timestamp: int, size: int, records: int) -> None:
            self.first_offset, self.last_offset, self.max_timestamp = first, last, max_timestamp
            self.valid_bytes, self.num_records, self.completed = size, records, []

    class FlatLog:
        def __init__(self) -> None:
            self.lock, self.moved_to = threading.RLock(), None
            self.size = self.next_offset = self.base_offset = self.recovery_point = 0
            self.entries = self.time_entries = self.since_last_entry = 0
            self.max_entries, self.max_timestamp, self.last_indexed_timestamp = count + 1, -1, -1
            self.rolling_based_timestamp: int | None = None
            self.read_starts: dict[int, int] = {}
            self.verified = [(0, 0)]
            self.epochs = [(0, 0)]
            self.appended_end = (0, 0)

        def append(self, buf: bytearray, epoch: int) -> Result:
            (base_offset, length, _, magic, crc, _, last_delta, _, max_timestamp, producer_id, _, _,
             records) = _BATCH_HEADER.unpack_from(buf, 0)
            size = len(buf)
            if magic != 2 or length + 12 != size or base_offset != 0 or records != last_delta + 1 \
                    or size > 1_048_588 or producer_id >= 0:
                raise ValueError("not a batch this bound covers")
            if crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]) != crc:
                raise ValueError("CRC mismatch")
            with self.lock:
                if self.moved_to is not None:
                    raise RuntimeError("moved")
                first = self.next_offset
                last = first + last_delta
                position = self.size
                based = self.rolling_based_timestamp
                if position > (1 << 30) - size or self.entries >= self.max_entries - 1 \
                        or not 0 <= last - self.base_offset <= 0x7FFFFFFF \
                        or (position and based is not None and max_timestamp - based > 7 * 86_400_000) \
                        or last + 1 - self.recovery_point >= 1 << 62:
                    raise RuntimeError("would roll or flush")
                _OFFSET_LENGTH_EPOCH.pack_into(buf, 0, first, length, epoch)
                end = position + os.pwrite(files[0], buf, position)
                self.size = end
                if position == 0:
                    self.rolling_based_timestamp = max_timestamp
                self.appended_end = (end, last + 1)
                starts = self.read_starts
                starts[last + 1] = end
                if len(starts) > 64:
                    del starts[next(iter(starts))]
                if self.verified[-1][1] == position:
                    self.verified[-1] = (self.verified[-1][0], end)
                if max_timestamp > self.max_timestamp:
                    self.max_timestamp = max_timestamp
                if self.since_last_entry > 4096:
                    _INDEX_ENTRY.pack_into(offset_index, self.entries * 8, last - self.base_offset, position)
                    self.entries += 1
                    if self.max_timestamp > self.last_indexed_timestamp:
                        _TIME_INDEX_ENTRY.pack_into(time_index, self.time_entries * 12, self.max_timestamp,
                                                    last - self.base_offset)
                        self.time_entries += 1
                        self.last_indexed_timestamp = self.max_timestamp
                    self.since_last_entry = size
                else:
                    self.since_last_entry += size
                self.next_offset = last + 1
                if self.epochs[-1][0] != epoch:
                    self.epochs.append((epoch, first))
                return Result(first, last, max_timestamp, size, records)

    log = FlatLog()
    os.sync()
    start = time.thread_time()
    for _ in range(count):
        batch[0:8] = ZERO_OFFSET
        log.append(batch, 0)
    cpu = time.thread_time() - start
    offset_index.close()
    time_index.close()
    for handle, suffix in zip(files, ("", ".index", ".timeindex"), strict=True):
        os.close(handle)
        os.remove(path + suffix)
    return cpu / count * 1e6


def log_read(log: Log, batch: bytearray, fetch_bytes: int) -> tuple[float, float]:
    """(MB/s building zero-copy slices only, MB/s including copying the bytes out)."""
    log.update_high_watermark(log.log_end_offset)
    records_per_batch = int.from_bytes(batch[57:61], "big")
    results = []
    for copy in (False, True):
        offset, read = 0, 0
        start = time.perf_counter()
        while offset < log.log_end_offset:
            info = log.read(offset, fetch_bytes, isolation=FetchIsolation.HIGH_WATERMARK)
            if copy:
                info.records.read_bytes()
            read += len(info.records)
            offset += len(info.records) // len(batch) * records_per_batch
        results.append(read / MIB / (time.perf_counter() - start))
    return results[0], results[1]


def recovery(directory: str, total: int) -> tuple[float, int]:
    path = os.path.join(directory, "recovery-0")
    log = Log(path, LogConfig.from_props({"segment.bytes": 128 * MIB}))
    batch = make_batch(16 * 1024)
    written = 0
    while written < total:
        batch[0:8] = ZERO_OFFSET
        log.append_as_leader(batch, leader_epoch=0)
        written += len(batch)
    for segment in log.segments:  # a crash: nothing closed or flushed by us
        segment.offset_index.close_handler()
        segment.time_index.close_handler()
        segment.log.close()
    start = time.perf_counter()
    reopened = Log(path, LogConfig.from_props({"segment.bytes": 128 * MIB}), recovery_point=0)
    elapsed = time.perf_counter() - start
    assert reopened.log_end_offset == log.log_end_offset
    reopened.close()
    return elapsed, written


def fmt(values: list[float]) -> str:
    return "/".join(f"{v:.0f}" for v in values)


def summary(label: str, raws: list[WriteResult], appends: list[WriteResult], floors: list[float],
            flats: list[float]) -> str:
    lines = []
    for kind in ("buffered", "buffered_cpu", "synced"):
        raw = statistics.median(getattr(r, kind) for r in raws)
        appended = statistics.median(getattr(a, kind) for a in appends)
        lines.append(
            f"{label:>6} batches, {kind:12}: append {appended:8.1f} MB/s | raw {raw:8.1f} MB/s | "
            f"ratio {appended / raw:6.1%}   [raw {fmt([getattr(r, kind) for r in raws])}; "
            f"append {fmt([getattr(a, kind) for a in appends])}]"
        )
    raw_us = statistics.median(r.cpu_us_per_write for r in raws)
    append_us = statistics.median(a.cpu_us_per_write for a in appends)
    floor_us, flat_us = statistics.median(floors), statistics.median(flats)
    lines.append(
        f"{label:>6} batches, CPU per write: raw pwrite {raw_us:.1f} us, log append {append_us:.1f} us "
        f"=> fixed cost per append {append_us - raw_us:.1f} us (80% of raw allows {raw_us / 4:.1f} us); "
        f"floor of a validating Python append {floor_us:.1f} us = {raw_us / floor_us:.1%} of raw; "
        f"the log's work in one flat function {flat_us:.1f} us = {raw_us / flat_us:.1%} of raw"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=None, help="directory on the disk to test (default: a temp dir)")
    parser.add_argument("--size-mb", type=int, default=256, help="MiB written per append test")
    parser.add_argument("--recovery-mb", type=int, default=128, help="MiB of unflushed log to recover")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved runs per batch size")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    logging.basicConfig(level=logging.ERROR)  # recovery logs each rebuilt index at WARNING
    base = tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"directory: {base}  python {sys.version.split()[0]}")
    try:
        total = args.size_mb * MIB
        for size, label in ((16 * 1024, "16 KiB"), (MIB, "1 MiB")):
            batch = make_batch(size)
            count = -(-total // len(batch))  # the same bytes and write sizes for both sides
            raws, appends, reads, floors, flats = [], [], [], [], []
            for i in range(args.repeat):  # interleaved, alternating which goes first
                for side in ("raw", "log") if i % 2 == 0 else ("log", "raw"):
                    if side == "raw":
                        raws.append(raw_write(base, batch, count))
                    else:
                        appended, log = log_append(base, batch, count)
                        appends.append(appended)
                        reads.append(log_read(log, batch, MIB))
                        log.delete()
                floors.append(floor_cpu_us(base, batch, count))
                flats.append(flat_append_cpu_us(base, batch, count))
            print(summary(label, raws, appends, floors, flats))
            for kind, unit in (("buffered", "MB/s"), ("synced", "MB/s")):
                rows.append({"section": f"{label} batches", "name": f"{label} batches, {kind}", "unit": unit,
                             "higher_is_better": True,
                             "value": {"raw": statistics.median(getattr(r, kind) for r in raws),
                                       "log": statistics.median(getattr(a, kind) for a in appends)}})
            rows.append({"section": f"{label} batches", "name": f"{label} batches, CPU per write",
                         "unit": "µs", "higher_is_better": False,
                         "value": {"raw": statistics.median(r.cpu_us_per_write for r in raws),
                                   "log": statistics.median(a.cpu_us_per_write for a in appends),
                                   "floor": statistics.median(floors), "flat": statistics.median(flats)}})
            zero_copy = statistics.median(r[0] for r in reads)
            copied = statistics.median(r[1] for r in reads)
            print(f"{label:>6} batches, read: {zero_copy:8.1f} MB/s (slices) {copied:8.1f} MB/s (copied)")
        elapsed, written = recovery(base, args.recovery_mb * MIB)
        per_gib = elapsed * (1 << 30) / written
        print(
            f"recovery: {written / MIB:.0f} MiB of unflushed 16 KiB batches re-validated in {elapsed:.2f} s "
            f"=> {per_gib:.2f} s per GiB (scaled linearly)"
        )
        if args.json:
            bench_json.write(args.json, "storage_bench", "", rows, recovery_seconds_per_gib=per_gib,
                             kinds={"raw": "raw pwrite", "log": "log append", "floor": "floor (bare loop)",
                                    "flat": "flat bound (one function)"})
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
