"""A log dir that fills up: the broker answers KAFKA_STORAGE_ERROR for the partitions in it and stops
serving them (or halts when it has no other dir, as Kafka does), and loses nothing it acknowledged:
after space is freed a restart serves every acknowledged record. Found by the fault suite's
disk-full nemesis (tests/faults), where a follower's failed append used to kill its replica fetcher
for good, and a leader's closed the client's connection instead of answering."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DescribeLogDirsRequest, FetchRequest, ProduceRequest
from protocol.records.builder import RecordBatchBuilder
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import kafka_cli
from tests.harness.waiting import wait_for

if TYPE_CHECKING:
    from tests.faults.disks import SmallDisk

pytestmark = pytest.mark.integration

BATCH_VALUES = 50


@pytest.fixture
def small_disks(tmp_path: Path) -> Iterator[list[SmallDisk]]:
    """Two 32 MiB loop-mounted filesystems (root only)."""
    from tests.faults.disks import SmallDisk, loop_disks_unavailable_reason

    if reason := loop_disks_unavailable_reason():
        pytest.skip(reason)
    tag = f"pkfd{uuid.uuid4().hex[:4]}"
    disks = [SmallDisk(tag, tmp_path, f"dir{i}", size_mib=32) for i in range(2)]
    try:
        for disk in disks:
            disk.mount()
        yield disks
    finally:
        for disk in disks:
            disk.unmount()


# An hour ago: within retention, which (as in Kafka) first runs log.initial.task.delay.ms after start.
RECENT = int(time.time() * 1000) - 3_600_000


def _batch(first: int) -> bytearray:
    builder = RecordBatchBuilder(magic=2)
    for i in range(first, first + BATCH_VALUES):
        builder.append(RECENT + i, None, b"v%d" % i)
    return builder.build()


def _produce(broker: BrokerProcess, topic: str, partition: int, first: int) -> int:
    request = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=_batch(first))])])
    return broker.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0].error_code


def _fetch(broker: BrokerProcess, topic: str, partition: int) -> Any:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], topics=[FetchRequest.FetchTopic(
                               topic=topic, partitions=[FetchRequest.FetchPartition(
                                   partition=partition, fetch_offset=0, partition_max_bytes=50 << 20)])])
    return broker.request(ApiKey.FETCH, 12, request).responses[0].partitions[0]


def _values(broker: BrokerProcess, topic: str, partition: int) -> list[bytes]:
    """Every value of the partition, once it is served (after a restart the controller's
    LeaderAndIsr can come a moment after the broker answers requests)."""
    data = wait_for(lambda: (d := _fetch(broker, topic, partition)).error_code == 0 and d,
                    f"{topic}-{partition} to be served", 30)
    buf = bytes(data.records)
    return [r.value for pos, _ in iter_log_entries(buf) for r in decode_entry_records(buf, pos)]


def _produce_until_error(broker: BrokerProcess, batches: int) -> tuple[int, int | None]:
    """Produce to t-0 after its disk filled, until an answer is not success (the last blocks of a
    file can still take a batch or two); (batches acknowledged in all, that error or None when the
    broker halted before answering)."""
    for _ in range(200):
        try:
            code = _produce(broker, "t", 0, batches * BATCH_VALUES)
        except (OSError, ValueError):
            return batches, None
        if code != 0:
            return batches, code
        batches += 1
    raise AssertionError("a full disk took 200 more batches")


def _acknowledged(first_batches: int) -> list[bytes]:
    return [b"v%d" % i for i in range(first_batches * BATCH_VALUES)]


def _start_with_topic(broker: BrokerProcess, batches: int) -> None:
    """Start the broker, create t with two partitions (one per log dir) and produce ``batches`` to each."""
    broker.start()
    broker.create_topic("t", partitions=2)
    for first in range(0, batches * BATCH_VALUES, BATCH_VALUES):
        assert _produce(broker, "t", 0, first) == 0 and _produce(broker, "t", 1, first) == 0


def _every_dir_error(broker: BrokerProcess) -> dict[str, int]:
    results = broker.request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None)).results
    return {r.log_dir: r.error_code for r in results}


def test_full_log_dir_goes_offline_and_loses_nothing(zk_connect: str, tmp_path: Path,
                                                     small_disks: list[SmallDisk]) -> None:
    """Two log dirs: the full one's partition answers KAFKA_STORAGE_ERROR, the other keeps working."""
    broker = BrokerProcess(zk_connect, 0, tmp_path, {"log.dirs": ",".join(str(d.mount_point) for d in small_disks),
                                                     "log.segment.bytes": str(1 << 20)})
    broker.log_dir = small_disks[0].mount_point
    try:
        _start_with_topic(broker, 4)
        full = next(d for d in small_disks if (d.mount_point / "t-0").is_dir())
        full.fill()
        acknowledged, code = _produce_until_error(broker, 4)
        assert code == Errors.KAFKA_STORAGE_ERROR
        assert _produce(broker, "t", 0, acknowledged * BATCH_VALUES) == Errors.KAFKA_STORAGE_ERROR
        assert _produce(broker, "t", 1, 4 * BATCH_VALUES) == 0, "the healthy dir's partition must keep working"
        assert broker.process is not None and broker.process.poll() is None
        wait_for(lambda: "Stopped serving replicas [('t', 0)] and moving replicas [] in failed dir"
                 in broker.log_path.read_text(), "the failed dir's replicas to go offline", 10)
        full.free()
        broker.stop()
        broker.start()
        assert _values(broker, "t", 0) == _acknowledged(acknowledged)
        assert _values(broker, "t", 1) == _acknowledged(5)
    finally:
        broker.stop()


def test_broker_halts_when_its_only_log_dir_fills(zk_connect: str, tmp_path: Path,
                                                  small_disks: list[SmallDisk]) -> None:
    """One log dir: Kafka halts the broker ("all log dirs have failed"); a restart with space serves
    everything acknowledged before."""
    broker = BrokerProcess(zk_connect, 0, tmp_path, {"log.segment.bytes": str(1 << 20)})
    broker.log_dir = small_disks[0].mount_point
    broker.start()
    try:
        broker.create_topic("t", partitions=1)
        for first in range(0, 4 * BATCH_VALUES, BATCH_VALUES):
            assert _produce(broker, "t", 0, first) == 0
        small_disks[0].fill()
        acknowledged, code = _produce_until_error(broker, 4)
        assert code in (Errors.KAFKA_STORAGE_ERROR, None), code
        process = broker.process
        assert process is not None
        deadline = time.monotonic() + 30
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process.returncode == 1, broker.log_tail()
        assert "Shutdown broker because all log dirs in" in broker.log_path.read_text()
        small_disks[0].free()
        broker.kill()
        broker.wait_until_deregistered()  # as after a crash, the old session must expire first
        broker.start()
        wait_for(lambda: _values(broker, "t", 0) == _acknowledged(acknowledged), "acknowledged records after the restart",
                 30)
    finally:
        broker.stop()


def _partition_metadata(broker: BrokerProcess, topic: str, partition: int) -> Any:
    (found,) = [p for p in broker.metadata([topic]).topics[0].partitions if p.partition_index == partition]
    return found


def test_a_log_dir_unusable_at_startup_is_offline_and_its_replicas_are_not_recreated(zk_connect: str,
                                                                                     tmp_path: Path) -> None:
    """Kafka's log.dirs with a dir that fails at start-up: the broker starts on the others; the
    replicas that lived there answer KAFKA_STORAGE_ERROR and the controller takes them offline,
    instead of the broker creating them empty elsewhere (that would lose what they held); once the
    disk is back, a restart serves them with their data."""
    dirs = [tmp_path / "disk0", tmp_path / "disk1"]
    broker = BrokerProcess(zk_connect, 0, tmp_path, {"log.dirs": ",".join(map(str, dirs))})
    try:
        _start_with_topic(broker, 3)
        assert (dirs[1] / "t-1").is_dir()
        broker.stop()
        dirs[1].rename(tmp_path / "disk1-away")
        dirs[1].write_text("a dead disk")
        broker.start()
        assert _every_dir_error(broker) == {str(dirs[0]): 0, str(dirs[1]): Errors.KAFKA_STORAGE_ERROR}
        out = kafka_cli(tmp_path / "cli").run("kafka-log-dirs", ["--bootstrap-server", broker.bootstrap, "--describe"])
        (described,) = json.loads(out.stdout.splitlines()[-1])["brokers"]
        assert {d["logDir"]: d["error"] for d in described["logDirs"]} == {
            str(dirs[0]): None, str(dirs[1]): "org.apache.kafka.common.errors.KafkaStorageException"}
        offline = wait_for(lambda: (p := _partition_metadata(broker, "t", 1)).leader_id == -1 and p,
                           "t-1 to go offline")
        assert list(offline.offline_replicas) == [0]
        assert _produce(broker, "t", 1, 0) == Errors.KAFKA_STORAGE_ERROR
        assert _produce(broker, "t", 0, 3 * BATCH_VALUES) == 0, "the healthy dir must keep serving"
        assert not (dirs[0] / "t-1").exists()
        broker.stop()
        dirs[1].unlink()
        (tmp_path / "disk1-away").rename(dirs[1])
        broker.start()
        wait_for(lambda: _partition_metadata(broker, "t", 1).leader_id == 0, "t-1 back online")
        assert _values(broker, "t", 1) == _acknowledged(3)
        assert _values(broker, "t", 0) == _acknowledged(4)
    finally:
        broker.stop()


def test_a_disk_that_starts_failing_is_found_without_traffic_and_comes_back_after_repair(
        zk_connect: str, tmp_path: Path, small_disks: list[SmallDisk]) -> None:
    """A disk whose filesystem aborts (every write and fsync fails with EROFS, as ext4 with
    errors=remount-ro leaves a failing disk): the next high-watermark checkpoint finds it with no
    client writing, the dir goes offline, its partition answers KAFKA_STORAGE_ERROR to produce and
    fetch, the other dir serves on; after a repair and a restart everything acknowledged is there
    (fsynced at each append here: with one replica, what a dead disk had only in its page cache is
    gone, in Kafka too)."""
    broker = BrokerProcess(zk_connect, 0, tmp_path, {
        "log.dirs": ",".join(str(d.mount_point) for d in small_disks),
        "replica.high.watermark.checkpoint.interval.ms": "500", "log.flush.interval.messages": "1"})
    try:
        _start_with_topic(broker, 3)
        failing = next(d for d in small_disks if (d.mount_point / "t-0").is_dir())
        failing.fail()
        wait_for(lambda: _every_dir_error(broker)[str(failing.mount_point)] == Errors.KAFKA_STORAGE_ERROR,
                 "the failed disk's dir to go offline", 30)
        assert "Disk error while writing replication-offset-checkpoint" in broker.log_path.read_text()
        assert _produce(broker, "t", 0, 3 * BATCH_VALUES) == Errors.KAFKA_STORAGE_ERROR
        assert _fetch(broker, "t", 0).error_code == Errors.KAFKA_STORAGE_ERROR
        assert _produce(broker, "t", 1, 3 * BATCH_VALUES) == 0
        broker.stop()
        failing.repair()
        broker.start()
        wait_for(lambda: _values(broker, "t", 0) == _acknowledged(3), "t-0 back after the repair", 30)
        assert _values(broker, "t", 1) == _acknowledged(4)
    finally:
        broker.stop()
