"""Shared pieces of the cleaner tests: compacted logs and one cleaning round."""

from __future__ import annotations

from pathlib import Path

from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import LogEntryHeader, decode_entry_records
from protocol.records.record import Header
from storage.cleaner.cleaner import Cleaner, CleanerStats
from storage.cleaner.log_cleaner_manager import LogCleanerManager
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.throttler import Throttler
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_segment import now_ms

TP = ("t", 0)


def compacted(**overrides: object) -> LogConfig:
    props = {"cleanup.policy": "compact", "segment.bytes": 2048, "min.cleanable.dirty.ratio": 0.01}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return LogConfig.from_props(props)


def open_compacted(tmp_path: Path, config: LogConfig | None = None) -> Log:
    return Log(str(tmp_path / "t-0"), config or compacted())


def keyed_batch(
    items: list[tuple[bytes | None, bytes | None]], *, timestamp: int = 1_000, codec: int = 0,
    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
    headers: list[Header] | None = None,
) -> bytearray:
    builder = RecordBatchBuilder(
        compression=codec, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for i, (key, value) in enumerate(items):
        builder.append(timestamp + i, key, value, headers or ())
    return builder.build()


def finish_writes(log: Log) -> None:
    """Roll (the active segment is never cleaned) and commit everything (HW = log end)."""
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def clean_once(log: Log, now: int | None = None, map_memory: int = 1 << 20, io_buffer: int = 1 << 16,
               manager: LogCleanerManager | None = None) -> tuple[int, CleanerStats] | None:
    """One round of the cleaner on ``log`` as a cleaner thread runs it; None when nothing is due."""
    manager = manager or LogCleanerManager([str(Path(log.dir).parent)], lambda: {TP: log})
    current = now_ms() if now is None else now
    cleanable = manager.grab_filthiest_compacted_log(current)
    if cleanable is None:
        return None
    cleaner = Cleaner(0, OffsetMap(map_memory), io_buffer, 1 << 20, 0.9, Throttler(1e300), manager.check_cleaning_aborted)
    end = cleanable.first_dirty_offset
    try:
        end, stats = cleaner.do_clean(cleanable, current)
    finally:
        manager.done_cleaning(TP, str(Path(log.dir).parent), end)
    return end, stats


def batches(log: Log) -> list[tuple[LogEntryHeader, bytes]]:
    """(header, bytes) of every batch of every segment."""
    out = []
    for segment in log.segments:
        for _, header, data in segment.log.entries_with_data():
            out.append((header, bytes(data)))
    return out


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record (markers left out), in log order."""
    return [(r.offset, r.key, r.value) for h, data in batches(log) if not h.is_control
            for r in decode_entry_records(data, 0)]


def latest_values(log: Log) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    for _, key, value in records(log):
        assert key is not None
        latest[key] = value
    return latest
