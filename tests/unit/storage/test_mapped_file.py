"""MappedFile: a shared mapping that pins no descriptor, refuses writes when read-only and
refuses to unmap while a view of it is alive; a log of one segment holds one descriptor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.mapped_file import MappedFile
from storage.offset_index import OffsetIndex
from tests.unit.storage.storage_test_helpers import batch, open_log


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mapped(path: Path, size: int, writable: bool) -> MappedFile:
    fd = os.open(path, os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY, 0o644)
    try:
        if writable:
            os.ftruncate(fd, size)
        return MappedFile(fd, size, writable)
    finally:
        os.close(fd)


def test_writes_through_the_mapping_reach_the_file_and_no_descriptor_stays_open(tmp_path: Path) -> None:
    path = tmp_path / "f"
    before = _open_descriptors()
    mapping = _mapped(path, 4096, writable=True)
    assert _open_descriptors() == before
    mapping.view[10:15] = b"kafka"
    mapping.flush()
    with open(path, "rb") as f:
        assert f.read()[8:17] == b"\0\0kafka\0\0"
    mapping.close()
    mapping.close()  # a second close is a no-op


def test_a_read_only_mapping_refuses_writes_instead_of_crashing(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abcdefgh")
    mapping = _mapped(path, 8, writable=False)
    assert bytes(mapping.view[2:5]) == b"cde"
    with pytest.raises(TypeError):
        mapping.view[0:1] = b"x"
    mapping.close()


def test_close_refuses_while_a_slice_of_the_view_is_alive(tmp_path: Path) -> None:
    mapping = _mapped(tmp_path / "f", 4096, writable=True)
    part = mapping.view[100:200]
    with pytest.raises(BufferError):
        mapping.close()
    assert part[0] == 0  # still mapped: reading it does not crash
    part.release()
    mapping.close()


def test_mapping_failure_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        MappedFile(-1, 4096, writable=False)


def test_an_index_holds_no_descriptor_and_a_segment_only_its_log(tmp_path: Path) -> None:
    before = _open_descriptors()
    index = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, max_index_size=1024)
    index.append(5, 100)
    assert _open_descriptors() == before
    index.close()
    log = open_log(tmp_path / "topic-0")
    log.append_as_leader(batch(3), leader_epoch=0)
    assert _open_descriptors() == before + 1
    log.close()
    assert _open_descriptors() == before
