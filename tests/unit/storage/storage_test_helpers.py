"""Shared builders for the storage tests: record batches and small logs in tmp dirs."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from protocol.records.builder import RecordBatchBuilder, build_control_batch
from protocol.records.control import ControlRecordType, EndTransactionMarker
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.log import Log
from storage.log_config import LogConfig

SHARED = Path(__file__).resolve().parents[3].parent / "shared"
GOLDEN = SHARED / "golden-logs"


def batch(
    count: int = 1,
    *,
    timestamp: int = 1_000,
    value_size: int = 10,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamps: list[int] | None = None,
) -> bytearray:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for i in range(count):
        ts = timestamps[i] if timestamps else timestamp + i
        builder.append(ts, b"key-%d" % i, bytes([65 + i % 26]) * value_size)
    return builder.build()


def marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0, timestamp: int = 5_000) -> bytearray:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_control_batch(
        EndTransactionMarker(kind, coordinator_epoch), producer_id=producer_id, producer_epoch=producer_epoch,
        timestamp=timestamp,
    )


def config(**overrides: object) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): v for k, v in overrides.items()})


def open_log(path: Path, cfg: LogConfig | None = None, **kwargs: object) -> Log:
    return Log(str(path), cfg or LogConfig(), **kwargs)  # type: ignore[arg-type]


def offsets_in(data: bytes) -> list[int]:
    """Every record offset in a buffer of batches."""
    out = []
    for pos, _ in iter_log_entries(data):
        out.extend(r.offset for r in decode_entry_records(data, pos))
    return out


def read_all(log: Log, start: int | None = None) -> bytes:
    """Every batch from ``start`` to the log end, one segment-bounded read at a time."""
    offset = log.log_start_offset if start is None else start
    chunks = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records.read_bytes()
        if not data:
            break
        chunks.append(data)
        offset = max(h.next_offset for _, h in iter_log_entries(data))
    return b"".join(chunks)


def require_golden() -> Path:
    if not GOLDEN.is_dir():
        pytest.skip(f"golden logs not available at {GOLDEN} (../shared is absent)")
    return GOLDEN


def copy_golden(name: str, tmp_path: Path) -> Path:
    """Copy a golden data dir somewhere writable (the originals are read-only)."""
    src = require_golden() / name
    dst = tmp_path / name
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for item in dirs + files:
            p = os.path.join(root, item)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dst
