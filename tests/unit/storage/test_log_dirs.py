"""LogManager with several log dirs (JBOD): where new logs go, and dirs that are offline from the start."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from storage.errors import KafkaStorageError, LogDirNotFoundError, StorageError
from storage.log_config import LogConfig
from storage.log_manager import LogManager, parent_dir
from storage_test_helpers import batch, offsets_in, read_all


def _manager(tmp_path: Path, dirs: int = 2) -> LogManager:
    manager = LogManager([str(tmp_path / f"d{i}") for i in range(dirs)], LogConfig())
    manager.startup(broker_id=0, cluster_id="c")
    return manager


def test_new_logs_go_to_the_dir_with_the_fewest_logs_future_logs_counted(tmp_path: Path) -> None:
    manager = _manager(tmp_path, dirs=3)
    d0, d1, d2 = manager.log_dirs
    placed = [parent_dir(manager.get_or_create_log("t", p)) for p in range(4)]
    assert placed == [d0, d1, d2, d0]  # ties go to the first dir in log.dirs order
    manager.maybe_update_preferred_log_dir("t", 1, d2)
    future = manager.get_or_create_future_log("t", 1, None)
    assert parent_dir(future) == d2 and os.path.basename(future.dir).startswith("t-1.")
    assert os.path.basename(future.dir).endswith("-future")
    assert manager.next_log_dirs() == [d1, d0, d2]  # d0 and d2 hold two logs each, d1 one
    assert parent_dir(manager.get_or_create_log("u", 0)) == d1
    manager.shutdown()


def test_a_preferred_dir_wins_until_the_log_is_created(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    d0, d1 = manager.log_dirs
    manager.maybe_update_preferred_log_dir("t", 0, d1)
    assert parent_dir(manager.get_or_create_log("t", 0)) == d1
    assert parent_dir(manager.get_or_create_log("t", 1)) == d0
    with pytest.raises(LogDirNotFoundError):
        manager.is_log_dir_online(str(tmp_path / "elsewhere"))
    manager.shutdown()


def test_a_dir_that_is_not_a_directory_starts_offline_and_the_broker_keeps_the_others(tmp_path: Path) -> None:
    (tmp_path / "d1").write_text("not a directory")
    manager = _manager(tmp_path)
    d0, d1 = manager.log_dirs
    assert manager.live_log_dirs == [d0] and manager.offline_log_dirs == [d1]
    assert manager.failure_channel.is_offline(d1)
    log = manager.get_or_create_log("t", 0, is_new=True)  # a new replica may be created
    assert parent_dir(log) == d0
    with pytest.raises(KafkaStorageError, match="are offline"):  # an existing one may be in the offline dir
        manager.get_or_create_log("t", 1, is_new=False)
    manager.shutdown()


def test_no_usable_dir_stops_start_up(tmp_path: Path) -> None:
    for name in ("d0", "d1"):
        (tmp_path / name).write_text("not a directory")
    manager = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], LogConfig())
    with pytest.raises(StorageError, match="none of the specified log dirs .* can be created or validated"):
        manager.startup()


def test_a_dir_whose_log_dir_cannot_be_created_goes_offline_and_the_log_goes_elsewhere(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    d0, d1 = manager.log_dirs
    kept = manager.get_or_create_log("t", 0)
    kept.append_as_leader(batch(3), leader_epoch=0)
    assert parent_dir(kept) == d0
    shutil.rmtree(d1)
    Path(d1).write_text("the disk went away")  # making t-1 in it fails with ENOTDIR
    created = manager.get_or_create_log("t", 1)
    assert parent_dir(created) == d0 and manager.offline_log_dirs == [d1]
    assert offsets_in(read_all(kept)) == [0, 1, 2]
    manager.shutdown()


def test_offline_dirs_named_at_startup_are_not_loaded(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.get_or_create_log("t", 0).append_as_leader(batch(2), leader_epoch=0)
    manager.get_or_create_log("t", 1).append_as_leader(batch(2), leader_epoch=0)
    manager.shutdown()
    restarted = LogManager(manager.log_dirs, LogConfig())
    restarted.startup(initial_offline_dirs=[manager.log_dirs[1]])
    assert restarted.get_log("t", 0) is not None and restarted.get_log("t", 1) is None
    with pytest.raises(KafkaStorageError):
        restarted.get_or_create_log("t", 1, is_new=False)
    restarted.shutdown()


@pytest.mark.parametrize("failing", ["pread", "fsync"])
def test_a_read_or_flush_that_fails_takes_the_dir_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          failing: str) -> None:
    """Kafka's maybeHandleIOException around reads and flushes: the dir goes offline, the caller gets
    KAFKA_STORAGE_ERROR, and the other dir's logs are untouched."""
    manager = _manager(tmp_path)
    failed, healthy = manager.get_or_create_log("t", 0), manager.get_or_create_log("t", 1)
    for log in (failed, healthy):
        log.append_as_leader(batch(3), leader_epoch=0)
    reported = []
    manager.failure_channel.set_handler(reported.append)

    def broken(*args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(os, failing, broken)
        with pytest.raises(KafkaStorageError):
            failed.read(0, 1 << 20) if failing == "pread" else failed.flush()
    assert reported == [parent_dir(failed)] and manager.offline_log_dirs == [parent_dir(failed)]
    assert manager.handle_log_dir_failure(parent_dir(failed)) == ([("t", 0)], [])
    assert offsets_in(read_all(healthy)) == [0, 1, 2] and manager.get_log("t", 0) is None
    manager.shutdown()
