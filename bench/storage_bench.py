"""Storage benchmark: log append/read throughput next to the raw disk, and recovery time.

Run from the repository root:

    python bench/storage_bench.py [--dir DIR] [--size-mb 256] [--recovery-mb 128] [--repeat 3]

Appends whole 16 KiB and 1 MiB batches through Log.append_as_leader (CRC check, offset
assignment, producer-state and index work included) and compares them with plain
sequential os.write calls of the same sizes to the same disk in the same run; both finish
with one fsync. Reads walk the log with Log.read (whole-batch slices) and then copy the
bytes out, the fallback path of the network layer. Recovery writes an unflushed log,
drops it without closing it, and times the reopen that re-validates every batch.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def raw_write(directory: str, chunk: int, total: int) -> float:
    path = os.path.join(directory, f"raw-{chunk}.bin")
    data = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.sync()  # start from a clean page cache, as the log runs do
    start = time.perf_counter()
    written = 0
    while written < total:
        written += os.write(fd, data)
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.remove(path)
    return written / MIB / elapsed


def log_append(directory: str, batch_size: int, total: int) -> tuple[float, Log, bytearray]:
    log = Log(os.path.join(directory, f"bench-{batch_size}-0"), LogConfig())
    batch = make_batch(batch_size)
    os.sync()
    start = time.perf_counter()
    written = 0
    while written < total:
        batch[0:8] = ZERO_OFFSET  # the buffer is reused: producers send base offset 0
        log.append_as_leader(batch, leader_epoch=0)
        written += len(batch)
    log.flush()
    elapsed = time.perf_counter() - start
    return written / MIB / elapsed, log, batch


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=None, help="directory on the disk to test (default: a temp dir)")
    parser.add_argument("--size-mb", type=int, default=256, help="MiB written per append test")
    parser.add_argument("--recovery-mb", type=int, default=128, help="MiB of unflushed log to recover")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per batch size")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # recovery logs each rebuilt index at WARNING
    base = tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"directory: {base}  python {sys.version.split()[0]}")
    try:
        total = args.size_mb * MIB
        for size, label in ((16 * 1024, "16 KiB"), (MIB, "1 MiB")):
            raws, appends = [], []
            for _ in range(args.repeat):  # interleaved, so both see the same disk conditions
                raws.append(raw_write(base, size, total))
                appended, log, batch = log_append(base, size, total)
                appends.append(appended)
                zero_copy, copied = log_read(log, batch, MIB)
                log.delete()
            raw, appended = statistics.median(raws), statistics.median(appends)
            print(
                f"{label:>6} batches: append {appended:8.1f} MB/s | raw sequential write {raw:8.1f} MB/s | "
                f"ratio {appended / raw:5.1%} | read {zero_copy:8.1f} MB/s (slices) {copied:8.1f} MB/s (copied)"
                f"   [medians of {args.repeat}; raw {fmt(raws)}; append {fmt(appends)}]"
            )
        elapsed, written = recovery(base, args.recovery_mb * MIB)
        per_gib = elapsed * (1 << 30) / written
        print(
            f"recovery: {written / MIB:.0f} MiB of unflushed 16 KiB batches re-validated in {elapsed:.2f} s "
            f"=> {per_gib:.2f} s per GiB (scaled linearly)"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
