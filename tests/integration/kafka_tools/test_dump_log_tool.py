"""kafka-dump-log.sh on segments our broker wrote: the same batches sent to our broker and to real
Kafka leave byte-identical segments and indexes, Kafka's tool reads ours as it reads its own, and
``python -m storage.dump`` prints what Kafka's tool prints."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.broker import REPO_ROOT
from tests.integration.kafka_tools.tool_support import SideBySide, timed_batch, unique

pytestmark = pytest.mark.integration

T0 = 1_600_000_000_000
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd


@pytest.fixture(scope="module")
def topic(sides: SideBySide) -> str:
    """Twenty batches in every codec over several small segments with dense indexes, on both sides."""
    name = unique("dump")
    sides.create_topic(name, configs={"segment.bytes": "2000", "index.interval.bytes": "300", "retention.ms": "-1"})
    batches = [timed_batch([(T0 + 10 * b + r, f"key-{b}-{r}".encode(), f"value {b}/{r} ".encode() * 3)
                            for r in range(5)], codec=CODECS[b % len(CODECS)]) for b in range(20)]
    sides.produce(name, batches)
    return name


def _segment_files(log_dir: Path, topic: str) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((log_dir / f"{topic}-0").iterdir())
            if f.suffix in (".log", ".index", ".timeindex")}


def test_segments_are_byte_identical(sides: SideBySide, topic: str) -> None:
    ours = _segment_files(sides.ours[0].log_dir, topic)
    kafka = _segment_files(sides.kafka[0].log_dir, topic)
    assert sorted(ours) == sorted(kafka) and len(ours) >= 9  # three segments or more
    active = max(name for name in ours if name.endswith(".log"))
    for name in ours:
        if name.endswith(".log") or not name.startswith(active[:-4]):  # the active indexes are preallocated
            assert ours[name] == kafka[name], f"{name} differs from Kafka's"


def test_kafka_dump_log_reads_our_segments_as_kafkas(sides: SideBySide, topic: str) -> None:
    names = sorted(_segment_files(sides.ours[0].log_dir, topic))
    files = ",".join(f"{{log_dir}}/{topic}-0/{name}" for name in names)
    dumped = sides.same("kafka-dump-log", ["--deep-iteration", "--print-data-log", "--files", files])
    text = dumped.stdout
    assert text.count("| offset: ") == 100 and text.count("isvalid: true") == 20
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert text.count(f"compresscodec: {codec}") == 4
    assert "offset: 99 CreateTime:TS keySize: 8 valueSize: 33" in text
    assert text.count("Dumping LOGDIR") == len(names) and "position: " in text


def test_storage_dump_prints_what_kafka_dump_log_prints(sides: SideBySide, topic: str) -> None:
    partition_dir = sides.ours[0].log_dir / f"{topic}-0"
    files = [str(partition_dir / name) for name in sorted(_segment_files(sides.ours[0].log_dir, topic))]
    for options in (["--deep-iteration", "--print-data-log"], []):
        java = sides.cli.run("kafka-dump-log", [*options, "--files", ",".join(files)])
        python = subprocess.run([sys.executable, "-m", "storage.dump", *options, *files], cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=60, check=True)
        assert python.stdout == java.stdout
