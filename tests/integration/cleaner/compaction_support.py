"""What the compaction tests share: a key-update workload through a real producer, a full read
from offset 0 through a real consumer, and the cleaner checkpoint of a log dir."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class Workload:
    """What was produced: per key the last value (None for a tombstone) and its headers."""

    latest: dict[bytes, bytes | None] = field(default_factory=dict)
    headers: dict[bytes, list[tuple[str, bytes]]] = field(default_factory=dict)
    produced: int = 0


def produce_key_updates(bootstrap: str, topic: str, workload: Workload, *, keys: int, rounds: int, codec: str,
                        tombstone_every: int = 0, idempotent: bool = False, prefix: str = "key") -> None:
    """``rounds`` updates of ``keys`` keys (each with a header naming its round); with
    ``tombstone_every`` the last round deletes every n-th key instead."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                         "batch.size": 1024, "enable.idempotence": idempotent, "acks": "all"})
    errors: list[object] = []
    for r in range(rounds):
        for k in range(keys):
            key = f"{prefix}-{k}".encode()
            tombstone = tombstone_every and r == rounds - 1 and k % tombstone_every == 0
            value = None if tombstone else f"{codec}-round-{r}-{k}".encode() + b"." * (k % 40)
            headers = [("round", str(r).encode()), ("codec", codec.encode())]
            producer.produce(topic, key=key, value=value, headers=headers, partition=0,
                             on_delivery=lambda err, _msg: errors.append(err) if err else None)
            workload.latest[key] = value
            workload.headers[key] = headers
            workload.produced += 1
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == [], errors[:3]


@dataclass
class ReadBack:
    offsets: list[int]
    latest: dict[bytes, bytes | None]
    headers: dict[bytes, list[tuple[str, bytes]]]


def read_from_start(bootstrap: str, topic: str, timeout: float = 60.0) -> ReadBack:
    """Every record of partition 0 from offset 0 to its end (the end of partition event), with a
    real consumer."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        back = ReadBack([], {}, {})
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"no end of partition after {len(back.offsets)} records"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return back
                raise AssertionError(message.error())
            back.offsets.append(message.offset())
            back.latest[message.key()] = message.value()
            back.headers[message.key()] = list(message.headers() or [])
    finally:
        consumer.close()


def cleaner_checkpoint(log_dir: Path, topic: str, partition: int = 0) -> int:
    """The cleaner's first dirty offset recorded for the partition (-1 when none)."""
    path = log_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        name, number, offset = line.split()
        if (name, int(number)) == (topic, partition):
            return int(offset)
    return -1


def log_dir_records(partition_dir: Path) -> tuple[list[int], dict[bytes, bytes | None]]:
    """(offsets, each key's last value) of the data records in a partition directory's segments."""
    from protocol.records.log_entry import decode_entry_records
    from storage.file_records import FileRecords

    offsets: list[int] = []
    latest: dict[bytes, bytes | None] = {}
    for path in sorted(partition_dir.glob("*.log")):
        records = FileRecords.open(str(path), read_only=True)
        try:
            for _, header, data in records.entries_with_data():
                if header.is_control:
                    continue
                for record in decode_entry_records(data, 0):
                    offsets.append(record.offset)
                    assert record.key is not None
                    latest[record.key] = record.value
        finally:
            records.close()
    return offsets, latest
