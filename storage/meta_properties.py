"""meta.properties (per log dir) and partition.metadata (per partition), in Kafka's formats."""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from storage.checkpoints import write_atomically
from storage.errors import StorageError

META_PROPERTIES = "meta.properties"
ZK_VERSION = 0


class InconsistentMetadataError(StorageError):
    """Log dirs that disagree on broker.id/cluster.id, or a topic id that differs from the controller's."""


@dataclass(frozen=True)
class MetaProperties:
    version: int = ZK_VERSION
    broker_id: int | None = None
    cluster_id: str | None = None

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.broker_id is not None:
            props["broker.id"] = str(self.broker_id)
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        return props


def read_properties(path: str) -> dict[str, str]:
    """Java Properties subset: key=value lines, '#'/'!' comments, blank lines ignored."""
    props = {}
    with open(path, encoding="latin-1") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                key, _, value = line.partition(":")
            props[key.strip()] = value.strip()
    return props


def read_meta_properties(log_dir: str) -> MetaProperties | None:
    path = os.path.join(log_dir, META_PROPERTIES)
    if not os.path.exists(path):
        return None
    props = read_properties(path)
    try:
        version = int(props.get("version", "0"))
        broker_id = int(props["broker.id"]) if "broker.id" in props else None
    except ValueError as exc:
        raise InconsistentMetadataError(f"malformed {path}: {exc}") from exc
    return MetaProperties(version, broker_id, props.get("cluster.id"))


def write_meta_properties(log_dir: str, meta: MetaProperties) -> None:
    """Write as Properties.store does: an empty comment line, a date comment, then key=value."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = "#\n#" + stamp + "\n" + "".join(f"{k}={v}\n" for k, v in meta.to_properties().items())
    write_atomically(os.path.join(log_dir, META_PROPERTIES), body.encode("latin-1"))


def ensure_meta_properties(log_dirs: list[str], broker_id: int, cluster_id: str | None,
                           on_io_error: Callable[[str, OSError], None] | None = None) -> MetaProperties:
    """Check every log dir agrees with this broker; write meta.properties where missing. With
    ``on_io_error``, a dir whose file cannot be read or written is handed to it (it goes offline)
    instead of failing start-up."""
    wanted = MetaProperties(ZK_VERSION, broker_id, cluster_id)
    failed: set[str] = set()

    def io_error(log_dir: str, exc: OSError) -> None:
        if on_io_error is None:
            raise exc
        failed.add(log_dir)
        on_io_error(log_dir, exc)

    found_in: dict[str, MetaProperties | None] = {}
    for log_dir in log_dirs:
        try:
            found = found_in[log_dir] = read_meta_properties(log_dir)
        except OSError as exc:
            io_error(log_dir, exc)
            continue
        if found is None:
            continue
        if found.broker_id is not None and found.broker_id != broker_id:
            raise InconsistentMetadataError(
                f"stored broker.id {found.broker_id} in {log_dir} doesn't match configured broker.id {broker_id}"
            )
        if cluster_id is not None and found.cluster_id is not None and found.cluster_id != cluster_id:
            raise InconsistentMetadataError(
                f"the cluster id {cluster_id} doesn't match the stored cluster id {found.cluster_id} in {log_dir}"
            )
    for log_dir in log_dirs:
        if log_dir not in failed and found_in.get(log_dir) != wanted:
            try:
                write_meta_properties(log_dir, wanted)
            except OSError as exc:
                io_error(log_dir, exc)
    return wanted


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's 22-character URL-safe base64 form of a topic id."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except ValueError as exc:
        raise InconsistentMetadataError(f"malformed topic id {text!r}") from exc


def write_partition_metadata(partition_dir: str, topic_id: uuid.UUID) -> None:
    """``version: 0`` / ``topic_id: <id>`` with no trailing newline (43 bytes)."""
    text = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}"
    write_atomically(os.path.join(partition_dir, "partition.metadata"), text.encode())


def read_partition_metadata(partition_dir: str) -> uuid.UUID | None:
    path = os.path.join(partition_dir, "partition.metadata")
    if not os.path.exists(path):
        return None
    fields = dict(line.split(": ", 1) for line in open(path).read().splitlines() if ": " in line)
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise InconsistentMetadataError(f"malformed partition metadata file {path}")
    return decode_topic_id(fields["topic_id"])
