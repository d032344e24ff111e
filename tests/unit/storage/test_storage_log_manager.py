"""LogManager: log dirs, clean-shutdown marker, checkpoints, retention and flush entry points."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from storage.errors import StorageError
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from storage.meta_properties import InconsistentMetadataError
from storage_test_helpers import batch, offsets_in, read_all


def _manager(tmp_path: Path, dirs: int = 2, **kwargs: object) -> LogManager:
    manager = LogManager([str(tmp_path / f"d{i}") for i in range(dirs)], LogConfig(), **kwargs)  # type: ignore[arg-type]
    manager.startup()
    return manager


def test_logs_spread_over_dirs_and_survive_clean_restart(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    a = manager.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    b = manager.get_or_create_log("orders", 1)
    assert os.path.dirname(a.dir) != os.path.dirname(b.dir)
    a.append_as_leader(batch(3), leader_epoch=0)
    a.update_high_watermark(3)
    b.append_as_leader(batch(1), leader_epoch=0)
    manager.shutdown()
    d0 = tmp_path / "d0"
    assert json.loads((d0 / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": -1}
    assert not (d0 / ".lock").exists()  # Kafka deletes its lock files on shutdown
    checkpoint = (Path(os.path.dirname(a.dir)) / "replication-offset-checkpoint").read_text()
    assert checkpoint == "0\n1\norders 0 3\n"
    restarted = _manager(tmp_path)
    assert not (d0 / ".kafka_cleanshutdown").exists()
    log = restarted.get_log("orders", 0)
    assert log is not None and log.log_end_offset == 3 and log.high_watermark == 3 and log.recovery_point == 3
    assert offsets_in(read_all(log)) == [0, 1, 2]
    with pytest.raises(InconsistentMetadataError):
        restarted.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    restarted.shutdown()


def test_unclean_restart_recovers_and_garbage_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    manager = _manager(tmp_path, dirs=1)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(batch(2), leader_epoch=0)
    log.flush()
    manager.checkpoint_recovery_points()
    for segment in log.segments:  # crash: no close, no marker
        segment.log.close()
    manager._release_locks()  # the process died: the OS drops its locks
    (tmp_path / "d0" / "recovery-point-offset-checkpoint").write_bytes(b"0\n7\nnot a checkpoint\n")
    with open(tmp_path / "d0" / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 30)
    restarted = _manager(tmp_path, dirs=1)
    recovered = restarted.get_log("t", 0)
    assert recovered is not None and recovered.log_end_offset == 2
    assert os.path.getsize(tmp_path / "d0" / "t-0" / "00000000000000000000.log") == len(batch(2))
    restarted.shutdown()


def test_startup_checks_meta_properties(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")])
    manager.startup(broker_id=7, cluster_id="ZAJx9RX0SFuisj92dpmVfg")
    assert "broker.id=7" in (tmp_path / "d1" / "meta.properties").read_text()
    manager.shutdown()
    other = LogManager([str(tmp_path / "d0")])
    with pytest.raises(InconsistentMetadataError):
        other.startup(broker_id=8, cluster_id="ZAJx9RX0SFuisj92dpmVfg")


def test_log_dir_lock_is_exclusive(tmp_path: Path) -> None:
    manager = _manager(tmp_path, dirs=1)
    with pytest.raises(StorageError, match="lock"):
        _manager(tmp_path, dirs=1)
    manager.shutdown()


def test_retention_flush_and_delete(tmp_path: Path) -> None:
    size = len(batch(1))
    manager = _manager(
        tmp_path, dirs=1, topic_configs={"t": {"segment.bytes": 2 * size, "retention.bytes": 2 * size, "flush.ms": 0, "file.delete.delay.ms": 0}},
    )
    log = manager.get_or_create_log("t", 0)
    now = int(time.time() * 1000)  # recent timestamps: retention.ms (7 days) must not apply
    for _ in range(6):
        log.append_as_leader(batch(1, timestamp=now), leader_epoch=0)
    log.update_high_watermark(6)
    assert log.recovery_point < 6
    manager.flush_dirty_logs()
    assert log.recovery_point == 6
    assert manager.cleanup_logs() == 2 and log.log_start_offset == 4
    manager.checkpoint_log_start_offsets()
    assert (tmp_path / "d0" / "log-start-offset-checkpoint").read_text() == "0\n0\n"  # equals the first base
    log.maybe_increment_log_start_offset(5, from_delete_records=True)
    manager.checkpoint_log_start_offsets()
    assert (tmp_path / "d0" / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 5\n"
    manager.update_topic_config("t", {"retention.ms": "1"})
    assert log.config.retention_ms == 1 and log.config.segment_bytes == LogConfig().segment_bytes
    manager.delete_log("t", 0)
    assert manager.get_log("t", 0) is None and not [n for n in os.listdir(tmp_path / "d0") if n.startswith("t-0")]
    manager.shutdown()


def test_scheduler_runs_periodic_tasks(tmp_path: Path) -> None:
    manager = _manager(tmp_path, dirs=1, high_watermark_checkpoint_interval_ms=1)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(batch(1), leader_epoch=0)
    log.update_high_watermark(1)
    manager.start_scheduler(tick_ms=5)
    path = tmp_path / "d0" / "replication-offset-checkpoint"
    deadline = time.monotonic() + 10
    while "t 0 1" not in path.read_text() and time.monotonic() < deadline:
        time.sleep(0.01)
    manager.stop_scheduler()
    assert "t 0 1" in path.read_text()
    manager.shutdown()


def test_retention_first_runs_after_the_initial_task_delay(tmp_path: Path) -> None:
    """As Kafka's log.initial.task.delay.ms: expired data goes soon after startup, not only after a
    whole log.retention.check.interval.ms."""
    manager = _manager(tmp_path, dirs=1, retention_check_interval_ms=3_600_000, initial_task_delay_ms=0)
    log = manager.get_or_create_log("t", 0)
    manager.update_topic_config("t", {"retention.ms": "1000"})
    log.append_as_leader(batch(3, timestamp=1_600_000_000_000), leader_epoch=0)
    log.update_high_watermark(3)
    manager.start_scheduler(tick_ms=5)
    deadline = time.monotonic() + 10
    while log.log_start_offset < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    manager.stop_scheduler()
    assert log.log_start_offset == 3
    manager.shutdown()


def test_logs_are_created_concurrently_and_one_partition_gets_one_log(tmp_path: Path) -> None:
    """Creation runs outside the manager's lock: many threads asking for the same partitions get
    the same log each, new logs are spread over the dirs counting those still being created."""
    from concurrent.futures import ThreadPoolExecutor

    manager = _manager(tmp_path)
    topic_id = uuid.uuid4()
    with ThreadPoolExecutor(8) as pool:
        logs = list(pool.map(lambda i: manager.get_or_create_log("wide", i % 40, topic_id=topic_id), range(160)))
    for i, created in enumerate(logs):
        assert created is logs[i % 40]
    assert len({id(created) for created in logs}) == 40
    per_dir = [sum(1 for created in logs[:40] if os.path.dirname(created.dir) == str(tmp_path / f"d{d}"))
               for d in range(2)]
    assert per_dir == [20, 20]
    assert sorted(os.listdir(tmp_path / "d0") + os.listdir(tmp_path / "d1")).count("wide-0") == 1
    manager.shutdown()
