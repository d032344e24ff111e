"""spark_jobs on a real local Spark: the kafka-log source and the four jobs, against written logs."""
from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from protocol.records.batch import CRC_OFFSET
from spark_jobs import consumer_offsets, export, topic_stats, verify
from protocol.consumer_offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from spark_jobs.session import REPO_ROOT
from storage.log import Log
from tests.unit.spark.segment_files import SMALL_SEGMENTS, PartitionWriter
from tests.unit.spark.spark_read_helpers import expected_view, row_view

GOLDEN = Path(REPO_ROOT).parent / "shared" / "golden-logs"
MASTER = ["--master", "local[2]", "--no-progress"]


def _corrupted_copy(path: Path, dest: Path) -> tuple[Path, str, int]:
    shutil.copytree(path, dest)
    segment = sorted((dest / "events-1").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")
    data[second + CRC_OFFSET] ^= 0xFF
    segment.write_bytes(bytes(data))
    return dest, str(segment), second


def test_source_returns_what_was_written(spark, log_dir) -> None:
    path, expected = log_dir
    frame = spark.read.format("kafka-log").option("maxSplitBytes", "1500").load(str(path))
    assert frame.rdd.getNumPartitions() > 10
    rows = [r.asDict(recursive=True) for r in frame.collect()]
    assert sorted(row_view(r) for r in rows) == expected_view(expected)
    committed = spark.read.format("kafka-log").option("isolation.level", "read_committed").load(str(path))
    assert committed.count() == sum(1 for e in expected if not e.aborted)
    assert [f.simpleString() for f in frame.schema.fields[:8]] == [
        "key:binary", "value:binary", "topic:string", "partition:int", "offset:bigint", "timestamp:timestamp",
        "timestampType:int", "headers:array<struct<key:string,value:binary>>",
    ]


def test_source_reads_golden_logs(spark) -> None:
    if not GOLDEN.is_dir():
        pytest.skip(f"golden logs not found at {GOLDEN} (../shared is absent)")
    paths = [str(p) for p in sorted(GOLDEN.iterdir()) if p.is_dir()]
    counts = spark.read.format("kafka-log").option("maxSplitBytes", "300000").load(paths).groupBy(
        "topic", "partition").count().collect()
    got = {(r["topic"], r["partition"]): r["count"] for r in counts}
    assert got[("invoice", 1)] == 99523 and got[("__consumer_offsets", 13)] == 3093
    assert sum(got.values()) == 103005 and len(got) == 11


def test_corrupt_batch_fails_clearly_or_is_skipped(spark, log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    copy, segment, position = _corrupted_copy(path, tmp_path / "logs")
    reader = spark.read.format("kafka-log").option("topics", "events")
    with pytest.raises(Exception) as failure:
        reader.load(str(copy)).count()
    assert f"corrupt log segment {segment} at byte position {position}" in str(failure.value)
    skipped = reader.option("skipCorrupt", "true").load(str(copy)).count()
    assert skipped == sum(1 for e in expected if e.topic == "events") - 7


def test_export_round_trip(spark, log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    out = tmp_path / "export"
    assert export.main(["--log-dirs", str(path), "--output", str(out), "--decode", "utf8", *MASTER]) == 0
    back = spark.read.parquet(str(out))
    rows = [r.asDict(recursive=True) for r in back.collect()]
    for row in rows:
        row["compression"] = None
        assert row["valueString"] == (None if row["value"] is None else row["value"].decode())
    want = [(*e[:-1], None) for e in expected_view(expected)]
    assert sorted(row_view(r) for r in rows) == want
    topics = {p.name for p in out.iterdir() if p.is_dir()}
    assert topics == {"topic=events", "topic=txn", "topic=legacy"}
    assert (out / "topic=events" / "date=2023-11-14").is_dir()


def test_export_command_line(log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    out = tmp_path / "cli-export"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "spark_jobs.export", "--log-dirs", str(path), "--output", str(out),
         "--topics", "legacy", "txn", "--master", "local[1]", "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = pq.read_table(str(out), partitioning="hive")
    assert set(table.column_names) >= {"key", "value", "topic", "partition", "offset", "timestamp",
                                       "timestampType", "headers"}
    assert table.num_rows == sum(1 for e in expected if e.topic in ("legacy", "txn"))
    assert sorted(table.column("offset").to_pylist()) == sorted(
        e.offset for e in expected if e.topic in ("legacy", "txn"))


def test_topic_stats(spark, log_dir, tmp_path: Path) -> None:
    path, expected = log_dir
    out = tmp_path / "stats"
    assert topic_stats.main(["--log-dirs", str(path), "--output", str(out), *MASTER]) == 0
    stats = {(r["topic"], r["partition"]): r for r in spark.read.parquet(str(out / "partitions")).collect()}
    by_partition = collections.defaultdict(list)
    for e in expected:
        by_partition[(e.topic, e.partition)].append(e)
    assert set(stats) == set(by_partition)
    for key, rows in by_partition.items():
        got = stats[key]
        assert got["records"] == len(rows)
        assert (got["firstOffset"], got["lastOffset"]) == (min(e.offset for e in rows), max(e.offset for e in rows))
        assert got["distinctKeys"] == len({e.key for e in rows if e.key is not None})
        assert got["payloadBytes"] == sum(len(e.key or b"") + len(e.value or b"")
                                          + sum(len(k.encode()) + len(v or b"") for k, v in e.headers) for e in rows)
    codecs = {r["compression"] for r in spark.read.parquet(str(out / "compression")).collect()}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}
    traffic = spark.read.parquet(str(out / "traffic")).groupBy().sum("records").first()[0]
    assert traffic == sum(1 for e in expected if e.timestamp is not None)
    assert (out / "traffic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _write_consumer_offsets(log_dir: Path) -> None:
    orders = PartitionWriter(Log(str(log_dir / "orders-0"), SMALL_SEGMENTS), "orders", 0)
    orders.append([(None, b"order-%d" % i, ()) for i in range(10)])
    orders.log.close()
    offsets = PartitionWriter(Log(str(log_dir / "__consumer_offsets-0"), SMALL_SEGMENTS), "__consumer_offsets", 0)

    def commit(group: str, topic: str, partition: int, offset: int | None) -> None:
        value = None if offset is None else encode_offset_commit_value(OffsetCommitValue(offset, "", 1_700_000_000_000))
        offsets.append([(encode_key(OffsetCommitKey(group, topic, partition)), value, ())])

    commit("g1", "orders", 0, 3)
    offsets.append([(encode_key(GroupMetadataKey("g1")),
                     encode_group_metadata_value(GroupMetadataValue("consumer", 1, "range", None)), ())])
    commit("g1", "orders", 0, 7)
    commit("g2", "orders", 0, 5)
    commit("g2", "orders", 0, None)
    commit("g3", "orders", 1, 2)
    offsets.log.close()


def test_consumer_offsets_history_and_lag(spark, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _write_consumer_offsets(logs)
    out = tmp_path / "offsets"
    assert consumer_offsets.main(["--log-dirs", str(logs), "--output", str(out), *MASTER]) == 0
    history = [(r["group"], r["partition"], r["committedOffset"], r["deleted"])
               for r in spark.read.parquet(str(out / "history")).orderBy("group", "recordOffset").collect()]
    assert history == [("g1", 0, 3, False), ("g1", 0, 7, False), ("g2", 0, 5, False), ("g2", 0, None, True),
                       ("g3", 1, 2, False)]
    groups = spark.read.parquet(str(out / "groups")).collect()
    assert [(g["group"], g["generation"], g["protocol"]) for g in groups] == [("g1", 1, "range")]
    lag = {(r["group"], r["topic"], r["partition"]): (r["committedOffset"], r["logEndOffset"], r["lag"])
           for r in spark.read.parquet(str(out / "lag")).collect()}
    assert lag == {("g1", "orders", 0): (7, 10, 3), ("g3", "orders", 1): (2, None, None)}


def test_consumer_offsets_golden(spark, tmp_path: Path) -> None:
    if not GOLDEN.is_dir():
        pytest.skip(f"golden logs not found at {GOLDEN} (../shared is absent)")
    out = tmp_path / "offsets"
    logs = [str(GOLDEN / "k300-consumer-offsets"), str(GOLDEN / "k280-snappy-headers")]
    assert consumer_offsets.main(["--log-dirs", *logs, "--output", str(out), *MASTER]) == 0
    assert spark.read.parquet(str(out / "history")).count() == 3068 + 42
    lag = {(r["group"], r["topic"], r["partition"]): r["lag"] for r in spark.read.parquet(str(out / "lag")).collect()}
    assert lag[("my-first-app", "my-first-topic", 0)] == 0
    assert lag[("simple-consumer-example", "some-topic", 0)] == 1


def test_verify(log_dir, tmp_path: Path, spark, capsys: pytest.CaptureFixture[str]) -> None:
    path, _expected = log_dir
    assert verify.main(["--log-dirs", str(path), *MASTER]) == 0
    copy, segment, position = _corrupted_copy(path, tmp_path / "logs")
    out = tmp_path / "report"
    assert verify.main(["--log-dirs", str(copy), "--output", str(out), *MASTER]) == 1
    printed = capsys.readouterr().out
    assert f"{segment}:{position}: crc: record batch at position {position} failed its CRC check" in printed
    report = spark.read.parquet(str(out)).collect()
    assert [(r["file"], r["position"], r["kind"]) for r in report] == [(segment, position, "crc")]
