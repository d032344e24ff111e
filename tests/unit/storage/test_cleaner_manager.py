"""LogCleanerManager (which log, which range, the states) and the LogCleaner threads in a LogManager."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from storage.cleaner.cleaner_config import CleanerConfig
from storage.cleaner.log_cleaner_manager import ABORTED, IN_PROGRESS, LogCleanerManager, paused
from storage.errors import InvalidConfigError, LogCleaningAbortedError
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from cleaner_helpers import TP, compacted, finish_writes, keyed_batch, latest_values, open_compacted

NOW = 50_000_000


def _fill(log: Log, batches: int = 20, keys: int = 5, timestamp: int = 1000) -> None:
    for i in range(batches):
        log.append_as_leader(keyed_batch([(b"k%d" % (i % keys), b"v" * 30)], timestamp=timestamp), 0)


def _manager(tmp_path: Path, logs: dict) -> LogCleanerManager:  # type: ignore[type-arg]
    return LogCleanerManager([str(tmp_path)], lambda: logs)


def test_the_dirtiest_log_above_its_ratio_is_chosen_up_to_the_active_segment_and_the_lso(tmp_path: Path) -> None:
    a = Log(str(tmp_path / "a-0"), compacted(min_cleanable_dirty_ratio=0.3))
    b = Log(str(tmp_path / "b-0"), compacted(min_cleanable_dirty_ratio=0.5))
    plain = Log(str(tmp_path / "c-0"), LogConfig.from_props({"segment.bytes": 2048}))
    for tp_log in (a, b, plain):
        _fill(tp_log, 40)
        finish_writes(tp_log)
    _fill(b, 5)  # b's active segment holds data: uncleanable
    manager = _manager(tmp_path, {("a", 0): a, ("b", 0): b, ("c", 0): plain})
    second_segment = list(a.segments)[1].base_offset
    (tmp_path / "cleaner-offset-checkpoint").write_text(f"0\n1\na 0 {second_segment}\n")
    chosen = manager.grab_filthiest_compacted_log(NOW)
    assert chosen is not None and chosen.topic_partition == ("b", 0)  # b is all dirty, a half clean
    assert chosen.first_dirty_offset == 0 and chosen.first_uncleanable_offset == b.active_segment.base_offset
    assert manager.cleaning_state(("b", 0)) == IN_PROGRESS
    second = manager.grab_filthiest_compacted_log(NOW)
    assert second is not None and second.topic_partition == ("a", 0) and second.first_dirty_offset == second_segment
    assert manager.grab_filthiest_compacted_log(NOW) is None  # c is not compacted
    manager.done_cleaning(("a", 0), str(tmp_path), 20)
    assert manager.all_cleaner_checkpoints()[("a", 0)] == 20
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n0\n")
    a.update_high_watermark(second_segment + 1)  # the last stable offset bounds the dirty section
    lso_bound = manager.grab_filthiest_compacted_log(NOW)
    assert lso_bound is not None and lso_bound.first_uncleanable_offset == second_segment
    manager.done_cleaning(("a", 0), str(tmp_path), second_segment)
    a.update_high_watermark(5)  # nothing committed past the first segment: nothing to clean
    assert manager.grab_filthiest_compacted_log(NOW) is None
    for tp_log in (a, b, plain):
        tp_log.close()


def test_min_ratio_min_lag_and_max_lag(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compacted(min_cleanable_dirty_ratio=0.9))
    _fill(log, timestamp=NOW - 1000)
    finish_writes(log)
    manager = _manager(tmp_path, {TP: log})
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n1\nt 0 10\n")  # half clean: below 0.9
    assert manager.grab_filthiest_compacted_log(NOW) is None
    log.config = compacted(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=500)
    overdue = manager.grab_filthiest_compacted_log(NOW)  # older than max.compaction.lag.ms: cleaned anyway
    assert overdue is not None and overdue.need_compaction_now
    manager.done_cleaning(TP, str(tmp_path), 10)
    log.config = compacted(min_cleanable_dirty_ratio=0.01, min_compaction_lag_ms=5000)
    assert manager.grab_filthiest_compacted_log(NOW) is None  # every segment younger than the min lag
    log.config = compacted(min_cleanable_dirty_ratio=0.01, min_compaction_lag_ms=500)
    assert manager.grab_filthiest_compacted_log(NOW) is not None
    log.close()


def test_pause_abort_and_resume_follow_kafkas_states(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    _fill(log)
    finish_writes(log)
    manager = _manager(tmp_path, {TP: log})
    manager.abort_and_pause_cleaning(TP)
    manager.abort_and_pause_cleaning(TP)
    assert manager.cleaning_state(TP) == paused(2)
    assert manager.grab_filthiest_compacted_log(NOW) is None
    manager.resume_cleaning([TP])
    assert manager.cleaning_state(TP) == paused(1)
    manager.resume_cleaning([TP])
    assert manager.cleaning_state(TP) is None
    with pytest.raises(RuntimeError, match="cannot be resumed"):
        manager.resume_cleaning([TP])
    assert manager.grab_filthiest_compacted_log(NOW) is not None
    pauser = threading.Thread(target=manager.abort_and_pause_cleaning, args=(TP,))
    pauser.start()
    deadline = time.monotonic() + 10
    while manager.cleaning_state(TP) != ABORTED and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(LogCleaningAbortedError):
        manager.check_cleaning_aborted(TP)  # what the cleaning thread sees at its next check
    manager.done_cleaning(TP, str(tmp_path), 0)
    pauser.join(10)
    assert not pauser.is_alive() and manager.cleaning_state(TP) == paused(1)
    log.close()


def test_invalid_thread_count_changes_are_refused() -> None:
    from storage.cleaner.log_cleaner import LogCleaner

    cleaner = LogCleaner(CleanerConfig(num_threads=2), [], dict)
    for threads, message in [(0, "at least 1"), (0, "at least 1"), (5, "more than double the current value 2")]:
        with pytest.raises(InvalidConfigError, match=message):
            cleaner.validate_reconfiguration(CleanerConfig(num_threads=threads))
    cleaner.validate_reconfiguration(CleanerConfig(num_threads=4))


def _log_manager(tmp_path: Path) -> LogManager:
    config = CleanerConfig(backoff_ms=20, dedupe_buffer_size=1 << 20)
    manager = LogManager([str(tmp_path / "d0")], LogConfig(), cleaner_config=config,
                         topic_configs={"t": {"cleanup.policy": "compact", "segment.bytes": "2048",
                                              "min.cleanable.dirty.ratio": "0.01"}})
    manager.startup()
    return manager


def _wait(condition, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_log_managers_cleaner_threads_compact_truncations_pause_them_deletion_stops_them(tmp_path: Path) -> None:
    manager = _log_manager(tmp_path)
    try:
        tp_log = manager.get_or_create_log("t", 0)
        _fill(tp_log, batches=60)
        finish_writes(tp_log)
        end = tp_log.log_end_offset
        manager.start_scheduler(tick_ms=50)
        checkpoint = tmp_path / "d0" / "cleaner-offset-checkpoint"
        _wait(lambda: checkpoint.read_text() == f"0\n1\nt 0 {end}\n")
        assert latest_values(tp_log) == {b"k%d" % k: b"v" * 30 for k in range(5)}
        tp_log.truncate_to(3)  # below the cleaned point: the checkpoint follows the log back
        assert checkpoint.read_text() == f"0\n1\nt 0 {tp_log.active_segment.base_offset}\n"
        assert manager.cleaner is not None
        state = manager.cleaner.manager.cleaning_state(TP)  # the pause ended (a cleaner may have taken it again)
        assert state is None or state == IN_PROGRESS
        manager.delete_log("t", 0)
        assert checkpoint.read_text() == "0\n0\n"
    finally:
        manager.shutdown()
