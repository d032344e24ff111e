"""Crash safety: a writer appending in a loop is SIGKILLed at random moments, many times.

After every kill the log is reopened with recovery and must be a valid prefix of what was
appended (every batch intact, offsets contiguous, contents as written), its indexes must
agree with the data, and everything the writer reported as flushed must still be there.
The writer is this file run as a script; it uses an idempotent producer id, so a wrong
producer state after recovery would fail its next append.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from protocol.records.builder import RecordBatchBuilder  # noqa: E402
from protocol.records.log_entry import decode_entry_records  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402
from tests.harness.processes import run_until_killed  # noqa: E402

pytestmark = pytest.mark.integration

PRODUCER_ID = 4242
RECORDS_PER_BATCH = 4
FLUSH_EVERY = 25
CONFIG = LogConfig.from_props({"segment.bytes": 96 * 1024, "index.interval.bytes": 1024})
RUN_SECONDS = 25.0
MIN_CYCLES = 15


def expected_value(offset: int) -> bytes:
    return b"value-%08d-" % offset + bytes([offset % 251]) * (offset % 97)


def build_batch(next_offset: int, sequence: int) -> bytearray:
    builder = RecordBatchBuilder(producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=sequence)
    now = int(time.time() * 1000)
    for i in range(RECORDS_PER_BATCH):
        builder.append(now, b"%d" % (next_offset + i), expected_value(next_offset + i))
    return builder.build()


def writer_main(directory: str) -> None:
    """Append forever, printing ``flushed <offset>`` after each fsync, until killed."""
    log = Log(directory, CONFIG, had_clean_shutdown=True, recovery_point=0)
    entry = log.producers.last_entry(PRODUCER_ID)
    sequence = 0 if entry is None else entry.last_seq + 1
    print(f"ready {log.log_end_offset}", flush=True)
    appended = 0
    while True:
        info = log.append_as_leader(build_batch(log.log_end_offset, sequence), leader_epoch=1)
        assert not info.duplicate
        sequence += RECORDS_PER_BATCH
        appended += 1
        if appended % FLUSH_EVERY == 0:
            log.flush()
            print(f"flushed {log.log_end_offset}", flush=True)


def verify(log: Log, recheck_from: int) -> None:
    """Every batch CRC-valid and contiguous; record contents checked from ``recheck_from``."""
    expected = log.log_start_offset
    for segment in log.segments:
        assert segment.base_offset == expected or segment.size == 0
        for position, header, data in segment.log.entries_with_data():
            assert header.base_offset == expected, f"gap at {position} in {segment.log.path}"
            assert header.record_count == RECORDS_PER_BATCH
            if header.base_offset >= recheck_from:
                for record in decode_entry_records(data, 0):
                    assert record.key == b"%d" % record.offset and record.value == expected_value(record.offset)
            expected = header.next_offset
        assert segment.size == sum(h.size for _, h in segment.log.entries())
        index = segment.offset_index
        for slot in range(index.entries):
            offset, position = index.entry(slot)
            found = segment.translate_offset(offset, position)
            assert found is not None and found[0] == position and found[1].last_offset == offset
        times = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
        assert [t for t, _ in times] == sorted({t for t, _ in times})
        assert all(segment.base_offset <= o < expected for _, o in times)
    assert expected == log.log_end_offset


def damage_unflushed_tail(directory: Path, flushed: int, rng: random.Random) -> int:
    """Simulate what a power loss adds to a kill: unflushed bytes torn off or turned to garbage.

    Only bytes past the last flushed offset are touched; returns 1 if something was damaged.
    """
    from storage.file_records import FileRecords

    active = max(directory.glob("*.log"))
    records = FileRecords.open(str(active), read_only=True)
    try:
        safe = 0
        for position, header in records.entries():
            if header.base_offset >= flushed:
                break
            safe = position + header.size
        size = len(records)
    finally:
        records.close()
    if size <= safe:
        return 0
    cut = rng.randrange(safe, size)
    with open(active, "r+b") as f:
        if rng.random() < 0.5:
            f.truncate(cut)
        else:
            f.seek(cut)
            f.write(bytes(rng.randrange(256) for _ in range(min(64, size - cut))))
    return 1


def test_sigkill_at_random_moments_leaves_a_valid_prefix(tmp_path: Path) -> None:
    seed = int(os.environ.get("STORAGE_CRASH_SEED", "0")) or random.randrange(1 << 30)
    try:
        run_kill_loop(tmp_path / "crash-0", random.Random(seed))
    except AssertionError as exc:
        raise AssertionError(f"{exc} (reproduce the damage pattern with STORAGE_CRASH_SEED={seed})") from exc


def run_kill_loop(directory: Path, rng: random.Random) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    flushed = 0
    verified_end = 0
    cycles = damaged = 0
    deadline = time.monotonic() + RUN_SECONDS
    while cycles < MIN_CYCLES or time.monotonic() < deadline:
        printed = run_until_killed([sys.executable, __file__, str(directory)], rng, env, 0.02, 0.4)
        for line in printed.splitlines():
            if line.startswith("flushed "):
                flushed = max(flushed, int(line.split()[1]))
        if rng.random() < 0.5:
            damaged += damage_unflushed_tail(directory, flushed, rng)
        log = Log(str(directory), CONFIG, recovery_point=flushed)
        try:
            assert log.log_end_offset >= flushed, "lost data that was acknowledged as flushed"
            verify(log, max(0, verified_end - 50 * RECORDS_PER_BATCH))
            verified_end = log.log_end_offset
        finally:
            log.close()
        cycles += 1
    assert flushed > 0 and cycles >= MIN_CYCLES and damaged > 0
    assert len([n for n in os.listdir(directory) if n.endswith(".log")]) > 1  # rolls happened too


if __name__ == "__main__":
    writer_main(sys.argv[1])
