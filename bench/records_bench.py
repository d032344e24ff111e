"""Micro-benchmarks of the record code: the broker's per-batch hot path and the codecs.

Run from the repository root: ``python bench/records_bench.py [--min-time SECONDS]``.
Prints microseconds per operation; numbers are for comparison between runs on
one machine, nothing asserts them.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import bench_json  # noqa: E402
from protocol.records import batch  # noqa: E402
from protocol.records.builder import RecordBatchBuilder  # noqa: E402
from protocol.records.compression import CompressionType, compress, decompress  # noqa: E402
from protocol.records.log_entry import decode_entry_records  # noqa: E402

RECORD_SIZE = 100
WORDS = [b"order", b"invoice", b"customer", b"amount", b"status", b"shipped", b"EUR", b"42", b"true", b"null"]


def _value(rng: random.Random) -> bytes:
    """A 100-byte, JSON-ish value: compressible like real payloads, not trivially."""
    parts = b" ".join(rng.choice(WORDS) + b"%d" % rng.randrange(10_000) for _ in range(20))
    return parts[:RECORD_SIZE].ljust(RECORD_SIZE, b" ")


def _build(target_bytes: int, codec: int = CompressionType.NONE, seed: int = 1) -> bytearray:
    rng = random.Random(seed)
    builder = RecordBatchBuilder(compression=codec)
    timestamp = 1_700_000_000_000
    while builder.uncompressed_size < target_bytes - RECORD_SIZE - 20:
        builder.append(timestamp, b"key-%d" % rng.randrange(1000), _value(rng))
        timestamp += 1
    return builder.build()


def _measure(min_time: float, fn: Callable[[], object]) -> float:
    """Microseconds per call, from enough repetitions to fill ``min_time``."""
    fn()  # warm-up
    calls = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < min_time:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
    return elapsed / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds to spend on each measurement")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print(f"command: cd {shlex.quote(str(REPO))} && {shlex.join(['python', *sys.argv])}")
    print(f"python {sys.version.split()[0]}")

    small = _build(16 * 1024)
    epoch = [0]

    def validate_and_rebase() -> None:
        header = batch.validate_batch(small, 0)
        batch.set_base_offset(small, 0, header.base_offset + 1)
        epoch[0] += 1
        batch.set_partition_leader_epoch(small, 0, epoch[0])

    rng = random.Random(2)
    values = [_value(rng) for _ in range(16 * 1024 // RECORD_SIZE)]

    def build_16k() -> None:
        builder = RecordBatchBuilder()
        for i, value in enumerate(values):
            builder.append(1_700_000_000_000 + i, None, value)
        builder.build()

    big = _build(1024 * 1024)
    big_count = batch.read_batch_header(big).record_count

    rows = [
        (f"validate + re-base 16 KiB batch ({len(small)} bytes)", _measure(args.min_time, validate_and_rebase)),
        (f"build 16 KiB batch of {len(values)} x {RECORD_SIZE}-byte records", _measure(args.min_time, build_16k)),
        (
            f"decode all {big_count} records of a 1 MiB batch",
            _measure(args.min_time, lambda: decode_entry_records(big, 0)),
        ),
    ]
    payload = bytes(big[batch.RECORD_BATCH_OVERHEAD :])[: 1024 * 1024]
    for codec in list(CompressionType)[1:]:
        compressed = compress(codec, payload)
        ratio = len(compressed) / len(payload)
        rows.append((f"{codec.name.lower():6} compress 1 MiB (ratio {ratio:.2f})",
                     _measure(args.min_time, lambda c=codec: compress(c, payload))))
        rows.append((f"{codec.name.lower():6} decompress 1 MiB",
                     _measure(args.min_time, lambda c=codec, d=compressed: decompress(c, d))))

    width = max(len(name) for name, _ in rows)
    for name, micros in rows:
        print(f"{name:<{width}}  {micros:12.1f} us/op")
    if args.json:
        bench_json.write(args.json, "records_bench", "µs per operation",
                         [{"name": name.strip(), "value": micros} for name, micros in rows])


if __name__ == "__main__":
    main()
