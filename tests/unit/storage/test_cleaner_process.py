"""The cleaner process: a round run there matches a round run here; aborts, refused swaps and a
process that dies leave the log as it was and the next round works; the throttle is shared."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import pytest

from storage.cleaner.cleaner_config import CleanerConfig
from storage.cleaner import cleaner_process
from storage.cleaner.cleaner_process import CONTEXT, CleanerProcess, CleanerProcessError
from storage.cleaner.log_cleaner_manager import LogCleanerManager, LogToClean
from storage.cleaner.throttler import Throttler
from storage.errors import LogCleaningAbortedError
from storage.log import Log
from storage.log_segment import now_ms
from cleaner_helpers import TP, clean_once, compacted, finish_writes, keyed_batch, latest_values, open_compacted, \
    records

CONFIG = CleanerConfig(dedupe_buffer_size=1 << 20, io_buffer_size=8192)


def _written(tmp_path: Path, name: str, batches: int = 300, keys: int = 20) -> Log:
    log = open_compacted(tmp_path / name, compacted(segment_bytes=16384))
    for i in range(batches):
        log.append_as_leader(keyed_batch([(b"k%02d" % (i % keys), b"v%d" % i + b"." * 100)]), 0)
    finish_writes(log)
    return log


def _cleanable(log: Log) -> tuple[LogCleanerManager, LogToClean]:
    manager = LogCleanerManager([str(Path(log.dir).parent)], lambda: {TP: log})
    cleanable = manager.grab_filthiest_compacted_log(now_ms())
    assert cleanable is not None
    return manager, cleanable


def _leftovers(log: Log) -> list[str]:
    return [name for name in os.listdir(log.dir) if name.endswith((".cleaned", ".swap"))]


@pytest.fixture
def process() -> CleanerProcess:  # type: ignore[misc]
    cleaner = CleanerProcess(0, CONFIG, Throttler(1e300))
    yield cleaner
    cleaner.stop()


def test_a_round_in_the_process_leaves_the_log_a_round_here_leaves(tmp_path: Path, process: CleanerProcess,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    here, there = _written(tmp_path, "here"), _written(tmp_path, "there")
    expected = clean_once(here)
    assert expected is not None
    manager, cleanable = _cleanable(there)
    with caplog.at_level(logging.INFO, logger="storage.cleaner.LogCleaner"):
        end, stats = process.clean(cleanable, now_ms(), lambda: manager.check_cleaning_aborted(TP))
    manager.done_cleaning(TP, str(tmp_path / "there"), end)
    assert (end, stats.messages_read, stats.messages_written) == \
        (expected[0], expected[1].messages_read, expected[1].messages_written)
    assert records(there) == records(here) and latest_values(there) == {
        b"k%02d" % k: b"v%d" % (280 + k) + b"." * 100 for k in range(20)}
    assert [s.base_offset for s in there.segments] == [s.base_offset for s in here.segments]
    assert not _leftovers(there)
    # the process's log lines are the broker's, from the process's pid
    lines = [r for r in caplog.records if r.getMessage().startswith("Cleaner 0: Swapping in cleaned segment")]
    assert lines and all(r.process == process.pid != os.getpid() for r in lines)
    here.close()
    there.close()


def test_an_abort_stops_the_round_and_the_next_round_runs_in_the_same_process(tmp_path: Path) -> None:
    log = _written(tmp_path, "t-0", batches=600)
    before = records(log)
    slow = CleanerProcess(0, CONFIG, Throttler(200_000, check_interval_ms=20))  # ~0.4 s a pass
    try:
        manager, cleanable = _cleanable(log)

        def abort_while_copying() -> None:
            if _leftovers(log):  # the process has started writing the cleaned segment
                raise LogCleaningAbortedError("aborted by the test")

        with pytest.raises(LogCleaningAbortedError, match="aborted by the test"):
            slow.clean(cleanable, now_ms(), abort_while_copying)
        manager.done_cleaning(TP, str(tmp_path), cleanable.first_dirty_offset)
        assert records(log) == before and not _leftovers(log)
        pid = slow.pid
        slow.throttler.update_desired_rate_per_sec(1e300)
        manager, cleanable = _cleanable(log)
        end, _ = slow.clean(cleanable, now_ms(), lambda: None)
        assert slow.pid == pid and end == log.active_segment.base_offset
        assert len(records(log)) < len(before) and not _leftovers(log)
    finally:
        slow.stop()
        log.close()


def test_a_log_truncated_during_the_round_keeps_its_segments(tmp_path: Path, process: CleanerProcess) -> None:
    log = _written(tmp_path, "t-0")
    manager, cleanable = _cleanable(log)
    truncated = []

    def truncate_once() -> None:  # between the start of the round and its swap, as a replica would
        if not truncated:
            truncated.append(log.truncate_to(log.log_end_offset - 1))

    with pytest.raises(LogCleaningAbortedError):
        process.clean(cleanable, now_ms(), truncate_once)
    assert truncated == [True] and not _leftovers(log)
    assert latest_values(log)[b"k19"] == b"v279" + b"." * 100  # the truncated record (k19's last) is gone
    log.close()


def test_a_process_that_dies_fails_its_round_and_the_next_round_starts_another(tmp_path: Path,
                                                                               process: CleanerProcess) -> None:
    log = _written(tmp_path, "t-0")
    before = records(log)
    manager, cleanable = _cleanable(log)

    def kill_it() -> None:
        if process.pid is not None:
            os.kill(process.pid, signal.SIGKILL)

    with pytest.raises(CleanerProcessError, match="ended"):
        process.clean(cleanable, now_ms(), kill_it)
    manager.done_cleaning(TP, str(tmp_path), cleanable.first_dirty_offset)
    assert records(log) == before
    manager, cleanable = _cleanable(log)
    end, _ = process.clean(cleanable, now_ms(), lambda: None)
    assert end == log.active_segment.base_offset and not _leftovers(log)
    assert len(latest_values(log)) == 20 and len(records(log)) < len(before)
    log.close()


def test_a_round_that_does_not_stop_when_told_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleaner_process, "STOP_TIMEOUT_S", 0.5)
    log = _written(tmp_path, "t-0")
    before = records(log)
    stuck = CleanerProcess(0, CONFIG, Throttler(1, check_interval_ms=1))  # sleeps for hours
    try:
        manager, cleanable = _cleanable(log)
        started = time.monotonic()

        def abort_after_a_second() -> None:
            if time.monotonic() - started > 1:
                raise LogCleaningAbortedError("aborted by the test")

        with pytest.raises(LogCleaningAbortedError, match="aborted by the test"):
            stuck.clean(cleanable, now_ms(), abort_after_a_second)
        assert stuck.pid is None and time.monotonic() - started < 30
        assert records(log) == before
    finally:
        stuck.stop()
        log.close()


def _throttle_in_child(throttler: Throttler, observed: float) -> None:
    throttler.maybe_throttle(observed)


class _Clock:
    def __init__(self) -> None:
        self.ns = 0
        self.slept: list[float] = []

    def __call__(self) -> int:
        return self.ns

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_the_throttle_counts_the_bytes_of_every_process() -> None:
    clock = _Clock()  # the child gets a copy: its clock stays at 0, within the period
    throttler = Throttler(100, check_interval_ms=1_000, clock=clock, sleep=clock.sleep)
    throttler.share(CONTEXT)
    child = CONTEXT.Process(target=_throttle_in_child, args=(throttler, 700.0))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    clock.ns = 2_000_000_000  # the period ends: 1,400 bytes at 100 B/s take 14 s, 2 s of them gone
    throttler.maybe_throttle(700)
    assert clock.slept == [12.0]


def test_the_throttle_pauses_over_the_rate_and_the_others_wait_for_the_same_pause() -> None:
    clock = _Clock()
    throttler = Throttler(1000, check_interval_ms=100, clock=clock, sleep=clock.sleep)  # 1,000 B/s
    throttler.maybe_throttle(50)
    clock.ns = 50_000_000
    throttler.maybe_throttle(50)  # within the period: nothing checked yet
    assert clock.slept == []
    clock.ns = 200_000_000
    throttler.maybe_throttle(400)  # 500 B in 0.2 s: 0.3 s more to stay at 1,000 B/s
    assert clock.slept == [0.3]
    clock.ns = 300_000_000
    throttler.maybe_throttle(10)  # another thread during that pause waits for its end
    assert clock.slept == [0.3, 0.2]
    clock.ns = 500_000_000 + 150_000_000
    throttler.maybe_throttle(100)  # the new period began when the pause ended: 110 B in 0.15 s is fine
    assert clock.slept == [0.3, 0.2]
