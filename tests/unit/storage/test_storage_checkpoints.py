"""Checkpoint files, the leader-epoch cache, LogConfig and meta.properties."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from storage.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile
from storage.errors import CorruptCheckpointError, InvalidConfigError
from storage.leader_epoch_cache import UNDEFINED_EPOCH, EpochEntry, LeaderEpochFileCache
from storage.log_config import LogConfig, broker_defaults
from storage.meta_properties import (
    InconsistentMetadataError,
    MetaProperties,
    ensure_meta_properties,
    read_meta_properties,
    read_partition_metadata,
    write_partition_metadata,
)


def test_offset_checkpoint_format_and_atomic_write(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(str(path))
    assert path.exists() and path.stat().st_size == 0 and checkpoint.read() == {}
    checkpoint.write({("invoice", 0): 90867, ("my-topic", 12): 5})
    assert path.read_text() == "0\n2\ninvoice 0 90867\nmy-topic 12 5\n"
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert checkpoint.read() == {("invoice", 0): 90867, ("my-topic", 12): 5}


def test_concurrent_writers_of_one_checkpoint_file_do_not_collide(tmp_path: Path) -> None:
    """The high-watermark checkpoint task and a partition deletion write the same file from two
    threads; each write renames its own complete .tmp (Kafka's CheckpointFile holds a lock)."""
    path = str(tmp_path / "replication-offset-checkpoint")
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        try:
            for _ in range(200):
                OffsetCheckpointFile(path).write({("t", 0): offset})
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert OffsetCheckpointFile(path).read() in ({("t", 0): i} for i in range(3))


@pytest.mark.parametrize(
    "content",
    [b"1\n0\n", b"0\n2\ntopic 0 5\n", b"0\nx\n", b"0\n1\ntopic zero 5\n", b"0\n1\ntopic 0\n", b"\xff\xfe garbage"],
)
def test_garbage_checkpoints_raise_a_typed_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(str(path)).read()


def test_leader_epoch_checkpoint_reads_whitespace_separated(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0   0\n2\t3093\n")
    assert LeaderEpochCheckpointFile(str(path)).read() == [(0, 0), (2, 3093)]


def _cache(tmp_path: Path) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint")))


def test_leader_epoch_cache_assign_and_persist(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 10)  # same epoch, later offset: no change
    cache.assign(2, 100)
    cache.assign(3, 150)
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 100), EpochEntry(3, 150)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 100\n3 150\n"
    cache.assign(2, 120)  # a lower epoch drops the entries at or above it
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 120)]
    assert _cache(tmp_path).epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 120)]


def test_leader_epoch_end_offset_for(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for epoch, offset in [(1, 0), (3, 50), (5, 80)]:
        cache.assign(epoch, offset)
    assert cache.end_offset_for(5, 99) == (5, 99)
    assert cache.end_offset_for(3, 99) == (3, 80)
    assert cache.end_offset_for(4, 99) == (3, 80)
    assert cache.end_offset_for(0, 99) == (0, 0)
    assert cache.end_offset_for(6, 99) == (UNDEFINED_EPOCH, -1)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 99) == (UNDEFINED_EPOCH, -1)
    assert cache.epoch_for_offset(60) == 3


def test_leader_epoch_truncation(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for epoch, offset in [(1, 0), (3, 50), (5, 80)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(80)
    assert cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(3, 50)]
    cache.truncate_from_start(60)
    assert cache.epoch_entries() == [EpochEntry(3, 60)]
    assert _cache(tmp_path).epoch_entries() == [EpochEntry(3, 60)]


def test_leader_epoch_truncation_to_the_first_entry_writes_nothing(tmp_path: Path) -> None:
    """Every log loaded at its start offset truncates its cache there: an fsync each at start-up
    when the entries were written again unchanged."""
    cache = _cache(tmp_path)
    cache.assign(4, 10)
    checkpoint = tmp_path / "leader-epoch-checkpoint"
    os.utime(checkpoint, (0, 0))  # a rewrite would move it
    cache.truncate_from_start(10)
    cache.truncate_from_start(5)
    assert cache.epoch_entries() == [EpochEntry(4, 10)] and checkpoint.stat().st_mtime == 0


def test_corrupt_leader_epoch_checkpoint_is_flagged(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n5\n1 2\n")
    cache = _cache(tmp_path)
    assert cache.was_corrupt and cache.epoch_entries() == []


def test_log_config_defaults_overrides_and_validation() -> None:
    default = LogConfig()
    assert default.segment_bytes == 1073741824 and default.index_interval_bytes == 4096
    assert default.max_message_bytes == 1048588 and default.file_delete_delay_ms == 60000
    cfg = LogConfig.from_props({"segment.bytes": "1000000", "cleanup.policy": "compact,delete", "preallocate": "true"})
    assert cfg.segment_bytes == 1000000 and cfg.compact_enabled and cfg.delete_enabled and cfg.preallocate
    assert cfg.overridden == {"segment.bytes", "cleanup.policy", "preallocate"}
    assert cfg.to_props()["segment.bytes"] == "1000000"
    with pytest.raises(InvalidConfigError):
        LogConfig.from_props({"segment.bytes": "lots"})
    with pytest.raises(InvalidConfigError):
        LogConfig.from_props({"message.timestamp.type": "Whenever"})
    broker = broker_defaults({"log.retention.hours": "1", "log.segment.bytes": 2048, "log.roll.ms": "5"})
    assert (broker.retention_ms, broker.segment_bytes, broker.segment_ms) == (3_600_000, 2048, 5)
    assert LogConfig.from_props({"retention.ms": "7"}, broker).segment_bytes == 2048


def test_timestamp_bounds_fall_back_to_the_deprecated_difference_setting() -> None:
    assert (LogConfig().timestamp_before_max_ms, LogConfig().timestamp_after_max_ms) == (2**63 - 1, 2**63 - 1)
    broker = broker_defaults({"log.message.timestamp.difference.max.ms": "1000"})
    assert (broker.timestamp_before_max_ms, broker.timestamp_after_max_ms) == (1000, 1000)
    topic = LogConfig.from_props({"message.timestamp.after.max.ms": "5"}, broker)
    assert (topic.timestamp_before_max_ms, topic.timestamp_after_max_ms) == (1000, 5)
    topic = LogConfig.from_props({"message.timestamp.difference.max.ms": "7", "message.timestamp.before.max.ms": "3"})
    assert (topic.timestamp_before_max_ms, topic.timestamp_after_max_ms) == (3, 7)


def test_meta_properties_consistency(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in dirs:
        os.makedirs(d)
    ensure_meta_properties(dirs, 3, "ZAJx9RX0SFuisj92dpmVfg")
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert text.startswith("#\n#") and "broker.id=3\n" in text and "version=0\n" in text
    assert read_meta_properties(dirs[1]) == MetaProperties(0, 3, "ZAJx9RX0SFuisj92dpmVfg")
    with pytest.raises(InconsistentMetadataError):
        ensure_meta_properties(dirs, 4, "ZAJx9RX0SFuisj92dpmVfg")
    with pytest.raises(InconsistentMetadataError):
        ensure_meta_properties(dirs, 3, "otherclusteridxxxxxxxx")


def test_partition_metadata_is_43_bytes(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    write_partition_metadata(str(tmp_path), topic_id)
    data = (tmp_path / "partition.metadata").read_bytes()
    assert len(data) == 43 and data.startswith(b"version: 0\ntopic_id: ") and not data.endswith(b"\n")
    assert read_partition_metadata(str(tmp_path)) == topic_id
