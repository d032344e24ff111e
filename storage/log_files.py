"""File and directory naming of Kafka's log layout (LogFileUtils / LocalLog)."""

from __future__ import annotations

import os
import re
import uuid

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

_DIR_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def file_name(offset: int, suffix: str) -> str:
    """``00000000000000030620.log``: the offset as 20 zero-padded digits plus the suffix."""
    return f"{offset:020d}{suffix}"


def segment_path(directory: str, offset: int, suffix: str, extra: str = "") -> str:
    return os.path.join(directory, file_name(offset, suffix) + extra)


def offset_from_file_name(name: str) -> int | None:
    """The base offset a segment/index/snapshot file name starts with, or None."""
    stem = os.path.basename(name).split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def suffixed_dir_name(topic: str, partition: int, suffix: str) -> str:
    """``<topic>-<partition>.<uuid>-future`` (or ``-delete``): Kafka's logDirNameWithSuffix."""
    return f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{suffix}"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future log's ``<topic>-<partition>.<uuid>-future`` directory."""
    if not name.endswith(FUTURE_DIR_SUFFIX) or "." not in name:
        return None
    return parse_partition_dir(name[: name.rindex(".")])


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a live ``<topic>-<partition>`` directory; None for anything else."""
    if "." in name.rsplit("-", 1)[-1] or name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    match = _DIR_NAME.match(name)
    return (match["topic"], int(match["partition"])) if match else None
