"""The replace-segments protocol: a crash between any two of its renames leaves a log that
loading rolls back (before every new segment is ``.swap``) or completes (after)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from storage.log import Log
from cleaner_helpers import clean_once, compacted, finish_writes, keyed_batch, latest_values, records

NOW = 10_000_000


class Crash(BaseException):
    """Stands for the process dying at a rename."""


def _source(tmp_path: Path) -> tuple[Path, dict[bytes, bytes | None], list[tuple[int, bytes | None, bytes | None]]]:
    directory = tmp_path / "source" / "t-0"
    log = Log(str(directory), compacted(segment_bytes=800))
    for i in range(30):
        log.append_as_leader(keyed_batch([(b"k%d" % (i % 7), b"v%d" % i), (b"j%d" % (i % 3), b"w%d" % i)]), 0)
    finish_writes(log)
    latest, before = latest_values(log), records(log)
    log.close()
    return directory, latest, before


def _renames_of_one_cleaning(tmp_path: Path, source: Path) -> int:
    directory = tmp_path / "count" / "t-0"
    shutil.copytree(source, directory)
    calls = 0
    real = os.rename

    def counting(a: str, b: str) -> None:
        nonlocal calls
        calls += 1
        real(a, b)

    log = Log(str(directory), compacted(segment_bytes=800), had_clean_shutdown=True, high_watermark=1 << 40)
    os.rename = counting  # type: ignore[assignment]
    try:
        clean_once(log, NOW)
    finally:
        os.rename = real
    log.close()
    return calls


def test_a_crash_at_every_rename_of_a_cleaning_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, latest, before = _source(tmp_path)
    total = _renames_of_one_cleaning(tmp_path, source)
    assert total >= 12  # several groups, four files each, three renames per file
    before_by_offset = {offset: (key, value) for offset, key, value in before}
    real = os.rename
    for crash_at in range(total):
        directory = tmp_path / f"crash-{crash_at}" / "t-0"
        shutil.copytree(source, directory)
        log = Log(str(directory), compacted(segment_bytes=800), had_clean_shutdown=True, high_watermark=1 << 40)
        calls = 0

        def dying(a: str, b: str) -> None:
            nonlocal calls
            if calls == crash_at:
                raise Crash()
            calls += 1
            real(a, b)

        monkeypatch.setattr(os, "rename", dying)
        with pytest.raises(Crash):
            clean_once(log, NOW)
        monkeypatch.setattr(os, "rename", real)
        # the crashed process's open files are simply abandoned, as after a kill
        reopened = Log(str(directory), compacted(segment_bytes=800), had_clean_shutdown=False)
        try:
            names = os.listdir(directory)
            assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], (crash_at, names)
            assert latest_values(reopened) == latest, crash_at
            offsets = [offset for offset, _, _ in records(reopened)]
            assert offsets == sorted(set(offsets)), crash_at
            for offset, key, value in records(reopened):
                assert before_by_offset[offset] == (key, value)
            assert reopened.log_end_offset == max(before_by_offset) + 1
            for segment in reopened.segments:
                segment.sanity_check()
        finally:
            reopened.close()
