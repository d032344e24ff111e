"""Segments written by real Kafka brokers (../shared/golden-logs): load, read, rebuild, dump.

Golden files are copied to a tmp dir before anything opens them writable.
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest

from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage import dump
from storage.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile
from storage.log_manager import LogManager
from storage.meta_properties import read_meta_properties, read_partition_metadata, write_partition_metadata
from storage.producer_state import encode_snapshot
from storage_test_helpers import config, copy_golden, open_log, read_all, require_golden

# (golden set, partition dir, log end offset, records)
PARTITIONS = [
    ("lj-invoice-3seg", "invoice-1", 99523, 99523),
    ("k280-snappy-headers", "some-topic-0", 9, 9),
    ("k280-snappy-headers", "__consumer_offsets-16", 69, 69),
    ("k300-consumer-offsets", "__consumer_offsets-13", 3093, 3093),
    ("k300-consumer-offsets", "my-first-topic-0", 11, 11),
    ("cp512-lz4-connect", "_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey-0", 14, 14),
    ("cp512-lz4-connect", "_confluent-command-0", 2, 2),
    ("cp512-lz4-connect", "__consumer_offsets-29", 78, 78),
    ("cp512-lz4-connect", "docker-connect-status-0", 135, 135),
    ("cp512-lz4-connect", "_schemas-0", 63, 63),
    ("cp512-lz4-connect", "test10-0", 8, 8),
]
INVOICE_ROLLED = ["00000000000000000000", "00000000000000030620", "00000000000000060492"]


@pytest.mark.parametrize("clean", [False, True])
@pytest.mark.parametrize(("golden", "partition", "end_offset", "records"), PARTITIONS)
def test_golden_partition_loads_and_reads(
    tmp_path: Path, golden: str, partition: str, end_offset: int, records: int, clean: bool
) -> None:
    root = copy_golden(golden, tmp_path)
    log = open_log(root / partition, config(segment_bytes=1000000), had_clean_shutdown=clean, recovery_point=0 if not clean else end_offset)
    assert log.log_end_offset == end_offset and log.log_start_offset == 0
    data = read_all(log)
    decoded = [r for pos, _ in iter_log_entries(data) for r in decode_entry_records(data, pos)]
    assert len(decoded) == records
    assert [r.offset for r in decoded] == sorted({r.offset for r in decoded})
    assert log.leader_epoch_cache.epoch_entries()[0] == (0, 0)
    log.close()


def test_invoice_offset_indexes_are_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    root = copy_golden("lj-invoice-3seg", tmp_path) / "invoice-1"
    originals = {name: (root / f"{name}.index").read_bytes() for name in INVOICE_ROLLED}
    original_times = {name: (root / f"{name}.timeindex").read_bytes() for name in INVOICE_ROLLED}
    for name in INVOICE_ROLLED:
        os.remove(root / f"{name}.index")
        os.remove(root / f"{name}.timeindex")
    log = open_log(root, config(segment_bytes=1000000), had_clean_shutdown=True, recovery_point=99523)
    log.close()
    for name in INVOICE_ROLLED:
        assert (root / f"{name}.index").read_bytes() == originals[name], name
        ours = _time_entries((root / f"{name}.timeindex").read_bytes())
        theirs = _time_entries(original_times[name])
        # same timestamps at the same moments; a pre-3.9 broker stored the record's offset,
        # we (like 3.9) store the last offset of the batch holding that record
        assert [t for t, _ in ours] == [t for t, _ in theirs], name
        batches = _batch_ranges(root / f"{name}.log")
        for (_, our_offset), (_, their_offset) in zip(ours, theirs):
            assert our_offset == next(last for first, last in batches if first <= their_offset <= last)


def _time_entries(data: bytes) -> list[tuple[int, int]]:
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def _batch_ranges(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    base = int(path.name.split(".")[0])
    return [(h.base_offset - base, h.last_offset - base) for _, h in iter_log_entries(data)]


def test_golden_indexes_are_used_as_they_are(tmp_path: Path) -> None:
    root = copy_golden("lj-invoice-3seg", tmp_path) / "invoice-1"
    before = (root / "00000000000000030620.index").read_bytes()
    log = open_log(root, config(segment_bytes=1000000), had_clean_shutdown=True, recovery_point=99523)
    segment = log.segments.get(30620)
    assert segment is not None and segment.offset_index.entries == 59 and segment.time_index.entries == 59
    assert segment.offset_index.lookup(31000).position <= segment.translate_offset(31000)[0]  # type: ignore[index]
    # a lookup by timestamp goes through the pre-3.9 time index entries
    first_ts = decode_entry_records(read_all(log, 45000)[:100_000], 0)[0]
    assert log.fetch_offset_by_timestamp(first_ts.timestamp)[1] <= 45000  # type: ignore[index]
    log.close()
    assert (root / "00000000000000030620.index").read_bytes() == before


def test_golden_log_accepts_appends_and_rolls_like_kafka(tmp_path: Path) -> None:
    from storage_test_helpers import batch

    root = copy_golden("lj-invoice-3seg", tmp_path) / "invoice-1"
    log = open_log(root, config(segment_bytes=1000000), had_clean_shutdown=True, recovery_point=99523)
    info = log.append_as_leader(batch(3), leader_epoch=1)
    assert info.first_offset == 99523
    assert log.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 99523)]
    log.close()
    assert (root / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 99523\n"


def test_golden_snapshots_checkpoints_and_metadata(tmp_path: Path) -> None:
    golden = require_golden()
    for snapshot in golden.glob("*/*/*.snapshot"):
        assert snapshot.read_bytes() == encode_snapshot([])
    k300 = golden / "k300-consumer-offsets"
    assert LeaderEpochCheckpointFile(str(k300 / "__consumer_offsets-13" / "leader-epoch-checkpoint"), create=False).read() == [(0, 0), (2, 3093)]
    recovery = OffsetCheckpointFile(str(golden / "lj-invoice-3seg" / "recovery-point-offset-checkpoint"), create=False).read()
    assert recovery[("invoice", 1)] == 90748 and len(recovery) == 5
    assert OffsetCheckpointFile(str(k300 / "cleaner-offset-checkpoint"), create=False).read() == {}
    assert read_meta_properties(str(golden / "cp512-lz4-connect")).broker_id == 1001  # type: ignore[union-attr]
    assert read_meta_properties(str(k300)).cluster_id == "ZAJx9RX0SFuisj92dpmVfg"  # type: ignore[union-attr]
    topic_id = read_partition_metadata(str(golden / "lj-invoice-3seg" / "invoice-1"))
    assert topic_id is not None
    write_partition_metadata(str(tmp_path), topic_id)
    assert (tmp_path / "partition.metadata").read_bytes() == (golden / "lj-invoice-3seg" / "invoice-1" / "partition.metadata").read_bytes()


def test_log_manager_loads_a_golden_log_dir(tmp_path: Path) -> None:
    root = copy_golden("k300-consumer-offsets", tmp_path)
    manager = LogManager([str(root)])
    manager.startup()
    assert manager.get_log("__consumer_offsets", 13).log_end_offset == 3093  # type: ignore[union-attr]
    assert manager.get_log("my-first-topic", 0).high_watermark == 11  # type: ignore[union-attr]
    manager.shutdown()
    assert (root / ".kafka_cleanshutdown").exists()
    lines = (root / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert lines[:2] == ["0", "2"] and "__consumer_offsets 13 3093" in lines


def _dump(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    dump.main(list(args), out, err)
    return out.getvalue(), err.getvalue()


def test_dump_log_matches_kafka_format(tmp_path: Path) -> None:
    segment = require_golden() / "lj-invoice-3seg" / "invoice-1" / "00000000000000000000.log"
    out, err = _dump(str(segment))
    lines = out.splitlines()
    assert lines[0] == f"Dumping {segment}" and lines[1] == "Log starting offset: 0"
    assert lines[2] == (
        "baseOffset: 0 lastOffset: 87 count: 88 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1718446825611 size: 2618 magic: 2 "
        "compresscodec: none crc: 3681653508 isvalid: true"
    )
    assert len(lines) == 2 + 403 and err == ""
    out, _ = _dump("--deep-iteration", str(segment))
    assert out.splitlines()[3] == "| offset: 0 CreateTime: 1718446825592 keySize: 4 valueSize: 16 sequence: -1 headerKeys: []"
    assert len(out.splitlines()) == 2 + 403 + 30620


def test_dump_print_data_log_with_headers_and_snappy() -> None:
    segment = require_golden() / "k280-snappy-headers" / "some-topic-0" / "00000000000000000000.log"
    out, _ = _dump("--print-data-log", str(segment))
    record = out.splitlines()[3]
    assert record.startswith("| offset: 0 CreateTime: 1641710433813 keySize: 57 valueSize: 30 sequence: -1 headerKeys: [__Key_TypeId__] key: {")
    assert record.endswith('payload: {"item":"book","price":"23.9"}')
    assert "compresscodec: snappy" in out.splitlines()[2]


def test_dump_log_append_time_lz4() -> None:
    segment = require_golden() / "cp512-lz4-connect" / "_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey-0" / "00000000000000000000.log"
    out, _ = _dump("--deep-iteration", str(segment))
    first = out.splitlines()[2]
    assert " LogAppendTime: " in first and "compresscodec: lz4" in first and "isvalid: true" in first


def test_dump_indexes_and_verification() -> None:
    root = require_golden() / "lj-invoice-3seg" / "invoice-1"
    out, err = _dump(str(root / "00000000000000000000.index"))
    assert out.splitlines()[1] == "offset: 664 position: 4225" and len(out.splitlines()) == 1 + 112 and err == ""
    out, err = _dump("--verify-index-only", str(root / "00000000000000000000.index"))
    assert out.splitlines() == [f"Dumping {root / '00000000000000000000.index'}"] and err == ""
    out, err = _dump(str(root / "00000000000000000000.timeindex"))
    assert out.splitlines()[1] == "timestamp: 1718446825645 offset: 662"
    # the pre-3.9 record offsets are reported the way Kafka's tool reports them
    assert "The following indexed offsets are not found in the log." in err
    assert "Indexed offset: 662, found log offset: 664" in err


def test_dump_reports_corruption(tmp_path: Path) -> None:
    root = copy_golden("lj-invoice-3seg", tmp_path) / "invoice-1"
    segment = root / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[2618 + 100] ^= 0xFF  # inside the second batch
    segment.write_bytes(bytes(data[:-10]))
    out, _ = _dump(str(segment))
    lines = out.splitlines()
    assert lines[3].endswith("isvalid: false") and lines[2].endswith("isvalid: true")
    assert lines[-1].startswith("Found ") and lines[-1].endswith(" invalid bytes at the end of 00000000000000000000.log")
    index = root / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    raw[4:8] = (4226).to_bytes(4, "big")  # first entry now points into the middle of a batch
    index.write_bytes(bytes(raw))
    _, err = _dump("--verify-index-only", str(index))
    assert err.startswith(f"Mismatches in :{index}")
