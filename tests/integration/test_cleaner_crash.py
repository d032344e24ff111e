"""Crash safety of compaction: a process that appends key updates and cleans its log in a loop
is SIGKILLed at random moments, many times.

After every kill the log is reopened with recovery (which completes or rolls back an
interrupted swap) and must hold no temporary files, no lost data (each key's latest value is
the one last written, every record present is the one written at its offset), offsets in
order and indexes that agree with the data. The worker is this file run as a script.
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
from storage.cleaner.cleaner import Cleaner  # noqa: E402
from storage.cleaner.log_cleaner_manager import LogCleanerManager  # noqa: E402
from storage.cleaner.offset_map import OffsetMap  # noqa: E402
from storage.cleaner.throttler import Throttler  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402
from storage.log_segment import now_ms  # noqa: E402
from tests.harness.processes import run_until_killed  # noqa: E402

pytestmark = pytest.mark.integration

CONFIG = LogConfig.from_props({
    "cleanup.policy": "compact", "segment.bytes": 6 * 1024, "index.interval.bytes": 512,
    "min.cleanable.dirty.ratio": 0.01, "file.delete.delay.ms": 0,
})
RECORDS_PER_BATCH = 8
KEYS = 60
RUN_SECONDS = 20.0
MIN_CYCLES = 12
TP = ("t", 0)


def key_of(offset: int) -> bytes:
    return b"key-%d" % (offset % KEYS)


def value_of(offset: int) -> bytes | None:
    return None if offset % 41 == 0 else b"value-%d-" % offset + b"x" * (offset % 50)


def worker_main(directory: str) -> None:
    """Append, roll, commit and clean forever, printing ``cleaned <offset>`` after each round."""
    tp_log = Log(os.path.join(directory, "t-0"), CONFIG, had_clean_shutdown=False)
    manager = LogCleanerManager([directory], lambda: {TP: tp_log})
    cleaner = Cleaner(0, OffsetMap(1 << 20), 2048, 1 << 20, 0.9, Throttler(1e300), manager.check_cleaning_aborted)
    print(f"ready {tp_log.log_end_offset}", flush=True)
    while True:
        for _ in range(random.randrange(5, 30)):
            start = tp_log.log_end_offset
            builder = RecordBatchBuilder(compression=random.choice([0, 0, 1, 3, 4]))
            for i in range(RECORDS_PER_BATCH):
                builder.append(now_ms(), key_of(start + i), value_of(start + i))
            tp_log.append_as_leader(builder.build(), leader_epoch=0)
        tp_log.roll()
        tp_log.update_high_watermark(tp_log.log_end_offset)
        cleanable = manager.grab_filthiest_compacted_log(now_ms())
        if cleanable is not None:
            end = cleanable.first_dirty_offset
            try:
                end, _ = cleaner.clean(cleanable)
            finally:
                manager.done_cleaning(TP, directory, end)
            print(f"cleaned {end}", flush=True)


def verify(tp_log: Log) -> None:
    names = os.listdir(tp_log.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    end = tp_log.log_end_offset
    expected = {}
    for offset in range(end):
        expected[key_of(offset)] = value_of(offset)
    latest: dict[bytes, bytes | None] = {}
    previous = -1
    for segment in tp_log.segments:
        segment.sanity_check()
        for _, header, data in segment.log.entries_with_data():
            assert header.base_offset > previous or header.record_count == 0
            for record in decode_entry_records(data, 0):
                assert record.offset > previous, f"offsets out of order at {record.offset}"
                assert (record.key, record.value) == (key_of(record.offset), value_of(record.offset))
                latest[record.key] = record.value
                previous = record.offset
            previous = max(previous, header.last_offset)
        index = segment.offset_index
        for slot in range(index.entries):
            offset, position = index.entry(slot)
            found = segment.translate_offset(offset, position)
            assert found is not None and found[0] == position and found[1].last_offset == offset
    # tombstones may be gone (never past their horizon here, but a key can be all tombstone)
    assert {k: v for k, v in latest.items()} == {k: v for k, v in expected.items() if k in latest}
    assert {k for k, v in expected.items() if v is not None} <= set(latest)


def test_sigkill_while_cleaning_loses_nothing_readable(tmp_path: Path) -> None:
    seed = int(os.environ.get("CLEANER_CRASH_SEED", "0")) or random.randrange(1 << 30)
    rng = random.Random(seed)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cycles = cleanings = 0
    deadline = time.monotonic() + RUN_SECONDS
    try:
        while cycles < MIN_CYCLES or time.monotonic() < deadline:
            printed = run_until_killed([sys.executable, __file__, str(tmp_path)], rng, env, 0.05, 0.6)
            cleanings += printed.count("cleaned ")
            tp_log = Log(str(tmp_path / "t-0"), CONFIG, had_clean_shutdown=False)
            try:
                verify(tp_log)
            finally:
                tp_log.close()
            cycles += 1
    except AssertionError as exc:
        raise AssertionError(f"{exc} (reproduce the kill pattern with CLEANER_CRASH_SEED={seed})") from exc
    assert cleanings > 0  # the workers got through whole cleanings between the kills, not only appends


if __name__ == "__main__":
    worker_main(sys.argv[1])
