"""segment_check: sound segments report nothing; corrupt entries and index entries are named."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

from protocol.records.batch import CRC_OFFSET
from spark_jobs.layout import discover
from spark_jobs.segment_check import check_segment


def _segments(path: Path) -> list:
    return [s for replica in discover([str(path)]) for s in replica.segments]


def test_sound_log_dir_has_no_problems(log_dir) -> None:
    path, expected = log_dir
    reports = [check_segment(s) for s in _segments(path)]
    assert [p for r in reports for p in r.problems] == []
    # records counted by verify include control markers: data rows + one per marker
    assert sum(r.records for r in reports) == len(expected) + 10


def test_golden_logs_are_sound(golden: Path) -> None:
    reports = [check_segment(s) for d in sorted(golden.iterdir()) if d.is_dir() for s in _segments(d)]
    assert len(reports) == 14
    assert [p for r in reports for p in r.problems] == []


def test_crc_and_index_problems_name_file_and_position(log_dir, tmp_path: Path) -> None:
    path, _expected = log_dir
    copy = tmp_path / "logs"
    shutil.copytree(path, copy)
    segment = _segments(copy / "events-0")[0]
    data = bytearray(Path(segment.path).read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")
    data[second + CRC_OFFSET] ^= 0x01
    Path(segment.path).write_bytes(bytes(data))
    index = bytearray(Path(segment.index_path).read_bytes())
    struct.pack_into(">i", index, 12, struct.unpack_from(">i", index, 12)[0] + 1)  # entry 1 position off by one
    Path(segment.index_path).write_bytes(bytes(index))

    problems = check_segment(segment).problems
    assert [(p.file, p.position, p.kind) for p in problems] == [
        (segment.path, second, "crc"),
        (segment.index_path, 8, "index"),
    ]
    assert "not the start of an entry" in problems[1].detail


def test_broken_framing_stops_the_scan(log_dir, tmp_path: Path) -> None:
    path, _expected = log_dir
    copy = tmp_path / "logs"
    shutil.copytree(path, copy)
    segment = _segments(copy / "legacy-0")[0]
    data = bytearray(Path(segment.path).read_bytes())
    struct.pack_into(">i", data, 8, -5)
    Path(segment.path).write_bytes(bytes(data))
    problems = check_segment(segment).problems
    assert (problems[0].file, problems[0].position, problems[0].kind) == (segment.path, 0, "framing")
