"""Segments written by real Kafka brokers (../shared/golden-logs, see PROVENANCE.md there)
decode fully with valid CRCs and match what PROVENANCE.md records about them."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from protocol.records import batch
from protocol.records.compression import XERIAL_MAGIC, CompressionType
from protocol.records.conversion import recompress_batch
from protocol.records.log_entry import decode_entry_records, iter_log_entries, validate_log_entry
from protocol.records.record import Record

GOLDEN = Path(__file__).resolve().parents[3].parent / "shared" / "golden-logs"
pytestmark = pytest.mark.skipif(
    not GOLDEN.is_dir(), reason=f"golden Kafka segments not available: {GOLDEN} is absent"
)


class Segment:
    """Every entry of one .log file, validated and decoded."""

    def __init__(self, relative: str) -> None:
        self.buf = (GOLDEN / relative).read_bytes()
        self.headers = []
        self.records: list[Record] = []
        self.positions = []
        end = 0
        for pos, header in iter_log_entries(self.buf):
            assert validate_log_entry(self.buf, pos).crc == header.crc
            records = decode_entry_records(self.buf, pos)
            assert len(records) == header.record_count
            assert [r.offset for r in records] == list(range(header.base_offset, header.next_offset))
            self.headers.append(header)
            self.positions.append(pos)
            self.records.extend(records)
            end = pos + header.size
        assert end == len(self.buf), "entries must parse to the exact end of the file"

    @property
    def offsets(self) -> tuple[int, int]:
        return self.records[0].offset, self.records[-1].offset

    @property
    def codecs(self) -> set[int]:
        return {h.compression for h in self.headers}


ALL_LOGS = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.log")) if GOLDEN.is_dir() else []


@pytest.mark.parametrize("relative", ALL_LOGS)
def test_every_golden_log_decodes_with_valid_crcs(relative: str) -> None:
    segment = Segment(relative)
    assert segment.records
    for header in segment.headers:
        # PROVENANCE: magic 2 only, no idempotent/transactional data, codecs none/snappy/lz4 only.
        assert header.magic == 2 and header.producer_id == -1 and not header.is_transactional
        assert not header.is_control
        assert header.compression in (CompressionType.NONE, CompressionType.SNAPPY, CompressionType.LZ4)
    assert batch.count_records(segment.buf) == len(segment.records)


@pytest.mark.parametrize(
    "name, batches, first, last",
    [
        ("00000000000000000000.log", 403, 0, 30619),
        ("00000000000000030620.log", 65, 30620, 60491),
        ("00000000000000060492.log", 61, 60492, 90747),
        ("00000000000000090748.log", 18, 90748, 99522),
    ],
)
def test_lj_invoice_segments(name: str, batches: int, first: int, last: int) -> None:
    segment = Segment(f"lj-invoice-3seg/invoice-1/{name}")
    assert len(segment.headers) == batches
    assert segment.offsets == (first, last) and len(segment.records) == last - first + 1
    assert segment.codecs == {CompressionType.NONE}
    assert {h.timestamp_type for h in segment.headers} == {0}
    for record in segment.records:
        assert len(record.key) == 4  # IntegerSerializer
        assert record.value.startswith(b"Simple Message-") and record.headers == []


def test_k280_snappy_with_headers() -> None:
    segment = Segment("k280-snappy-headers/some-topic-0/00000000000000000000.log")
    assert len(segment.headers) == 9 and len(segment.records) == 9 and segment.offsets == (0, 8)
    assert segment.codecs == {CompressionType.SNAPPY}
    for pos in segment.positions:  # the Java client's xerial framing, version 1 / compatible 1
        payload = segment.buf[pos + batch.RECORD_BATCH_OVERHEAD :]
        assert payload[:8] == XERIAL_MAGIC and struct.unpack_from(">ii", payload, 8) == (1, 1)
    for record in segment.records:
        assert [key for key, _ in record.headers] == ["__Key_TypeId__"]
        assert record.key.startswith(b"{") and record.value.startswith(b"{")


def _key_versions(segment: Segment) -> Counter:
    return Counter(struct.unpack_from(">h", r.key)[0] for r in segment.records)


def _value_versions(segment: Segment) -> Counter:
    return Counter(struct.unpack_from(">h", r.value)[0] for r in segment.records if r.value is not None)


def test_k280_consumer_offsets() -> None:
    segment = Segment("k280-snappy-headers/__consumer_offsets-16/00000000000000000000.log")
    assert len(segment.headers) == 69 and segment.offsets == (0, 68)
    assert segment.codecs == {CompressionType.NONE}
    assert _key_versions(segment) == {1: 42, 2: 27}
    assert _value_versions(segment) == {3: 69}


def test_k300_consumer_offsets() -> None:
    segment = Segment("k300-consumer-offsets/__consumer_offsets-13/00000000000000000000.log")
    assert len(segment.headers) == 1339 and len(segment.records) == 3093 and segment.offsets == (0, 3092)
    assert segment.codecs == {CompressionType.NONE}
    assert _key_versions(segment) == {1: 3068, 2: 25}
    assert _value_versions(segment) == {3: 3093}
    assert {h.partition_leader_epoch for h in segment.headers} == {0}
    assert max(h.record_count for h in segment.headers) > 1


def test_k300_first_topic() -> None:
    segment = Segment("k300-consumer-offsets/my-first-topic-0/00000000000000000000.log")
    assert len(segment.headers) == 10 and len(segment.records) == 11


def test_cp512_lz4_log_append_time() -> None:
    segment = Segment(
        "cp512-lz4-connect/_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey-0/"
        "00000000000000000000.log"
    )
    assert len(segment.headers) == 12 and len(segment.records) == 14
    assert segment.codecs == {CompressionType.LZ4}
    assert {h.timestamp_type for h in segment.headers} == {1}
    by_offset = {r.offset: r for r in segment.records}
    for header in segment.headers:  # LogAppendTime: every record carries the batch's max timestamp
        for offset in range(header.base_offset, header.next_offset):
            assert by_offset[offset].timestamp == header.max_timestamp


def test_cp512_command_topic() -> None:
    segment = Segment("cp512-lz4-connect/_confluent-command-0/00000000000000000000.log")
    assert len(segment.headers) == 1 and len(segment.records) == 2
    assert segment.codecs == {CompressionType.LZ4}


def test_cp512_consumer_offsets_with_tombstone() -> None:
    segment = Segment("cp512-lz4-connect/__consumer_offsets-29/00000000000000000000.log")
    assert len(segment.headers) == 78 and segment.codecs == {CompressionType.NONE}
    assert set(_key_versions(segment)) == {2} and set(_value_versions(segment)) == {2}
    assert sum(r.value is None for r in segment.records) == 1


@pytest.mark.parametrize(
    "topic, batches, records",
    [("docker-connect-status-0", 127, 135), ("_schemas-0", 63, 63), ("test10-0", 4, 8)],
)
def test_cp512_uncompressed_topics(topic: str, batches: int, records: int) -> None:
    segment = Segment(f"cp512-lz4-connect/{topic}/00000000000000000000.log")
    assert len(segment.headers) == batches and len(segment.records) == records
    assert segment.codecs == {CompressionType.NONE}


@pytest.mark.parametrize(
    "relative",
    [
        "k280-snappy-headers/some-topic-0/00000000000000000000.log",
        "cp512-lz4-connect/_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey-0/00000000000000000000.log",
    ],
)
def test_golden_compressed_batches_recompress_to_every_codec(relative: str) -> None:
    segment = Segment(relative)
    for pos, header in zip(segment.positions, segment.headers):
        original = decode_entry_records(segment.buf, pos)
        for codec in CompressionType:
            out = recompress_batch(segment.buf, pos, codec)
            again = validate_log_entry(out)
            assert again.compression == codec and again.max_timestamp == header.max_timestamp
            assert decode_entry_records(out) == original
