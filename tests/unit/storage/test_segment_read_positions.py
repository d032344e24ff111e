"""LogSegment remembers where appends and reads ended: reads that go on from there give exactly
what a segment without that memory gives, also after a truncation rewrote what lay there."""

from __future__ import annotations

from pathlib import Path

from protocol.records.log_entry import iter_log_entries
from storage.log import FetchIsolation, Log
from storage_test_helpers import batch, config, offsets_in, open_log


def _read(log: Log, offset: int, max_bytes: int, max_offset: int | None = None) -> tuple[int, bytes]:
    info = log.read(offset, max_bytes, max_offset=max_offset)
    return info.fetch_offset_metadata.relative_position_in_segment, info.records.read_bytes()


def _next_offset(data: bytes, offset: int) -> int:
    return max((h.next_offset for _, h in iter_log_entries(data)), default=offset)


def test_sequential_reads_match_a_log_without_remembered_positions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(index_interval_bytes=512))
    for i in range(300):
        log.append_as_leader(batch(1 + i % 3, value_size=40), leader_epoch=0)
    fresh = open_log(tmp_path / "t-0", config(index_interval_bytes=512))  # the same files, nothing remembered
    for max_bytes in (300, 1_000, 4_096):
        offset = 0
        while offset < log.log_end_offset:
            ours = _read(log, offset, max_bytes, max_offset=log.log_end_offset - 5)
            assert ours == _read(fresh, offset, max_bytes, max_offset=log.log_end_offset - 5)
            if not ours[1]:
                break
            offset = _next_offset(ours[1], offset)
            # mid-batch offsets are not remembered positions: found through the index as before
            assert _read(log, offset - 1, max_bytes) == _read(fresh, offset - 1, max_bytes)


def test_a_tail_read_after_an_append_is_exactly_what_was_appended(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), leader_epoch=0)
    end = log.log_end_offset
    appended = batch(3)
    log.append_as_leader(appended, leader_epoch=0)
    _, data = _read(log, end, 1 << 20)
    assert data == bytes(appended) and offsets_in(data) == [2, 3, 4]
    assert _read(log, end, 1 << 20, max_offset=4)[1] == b""  # the batch reaches the bound: not served
    assert log.read(log.log_end_offset, 1 << 20, FetchIsolation.LOG_END).records.read_bytes() == b""


def test_positions_remembered_before_a_truncation_are_forgotten(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(10):
        log.append_as_leader(batch(2, value_size=10), leader_epoch=0)
    _read(log, 12, 1 << 20)  # remembers 12 and the end, 20
    log.truncate_to(6)
    for _ in range(3):  # a new leader's batches, larger: offsets 6.. now lie elsewhere
        log.append_as_leader(batch(3, value_size=200), leader_epoch=1)
    fresh = open_log(tmp_path / "t-0")
    for offset in (6, 12, 14):
        assert _read(log, offset, 1 << 20) == _read(fresh, offset, 1 << 20)
    assert offsets_in(_read(log, 12, 1 << 20)[1])[0] == 12
