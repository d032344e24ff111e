"""Interoperability with kafka-python's own record builders and readers.

Batches built by kafka-python are decoded by ours, and ours are decoded by
kafka-python, for every codec each magic allows. kafka-python's builders only
compress when it saves space, so the payloads are compressible and every test
asserts the codec really used.
"""

from __future__ import annotations

import kafka.codec
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from protocol.records.builder import RecordBatchBuilder, build_control_batch
from protocol.records.compression import CompressionType, xxh32
from protocol.records.control import ControlRecordType, EndTransactionMarker
from protocol.records.log_entry import decode_entry_records, iter_log_entries, validate_log_entry

V2_CODECS = list(CompressionType)
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]
LEGACY_PARAMS = [
    pytest.param(magic, codec, id=f"magic{magic}-{codec.name}") for magic in (0, 1) for codec in LEGACY_CODECS
]


class _XXH32Shim:
    """Stands in for ``xxhash.xxh32`` (which kafka-python needs for magic 0 lz4) when the
    package is absent, using our XXH32 (checked against reference vectors elsewhere).
    kafka-python's own KIP-57 header handling is still what gets exercised."""

    def __init__(self, data: bytes) -> None:
        self._value = xxh32(bytes(data))

    def digest(self) -> bytes:
        return self._value.to_bytes(4, "big")


@pytest.fixture(autouse=True)
def _xxhash_for_kafka_python(monkeypatch: pytest.MonkeyPatch) -> None:
    if kafka.codec.xxhash is None:
        monkeypatch.setattr(kafka.codec, "xxhash", type("xxhash", (), {"xxh32": _XXH32Shim}))


def _sample(i: int) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    key = None if i % 4 == 0 else b"key-%d" % i
    value = None if i % 5 == 3 else b"value %d " % i * 20
    headers = [("trace", b"abc%d" % i), ("empty", None)] if i % 3 == 0 else []
    return 1_700_000_000_000 + i * 7, key, value, headers


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: c.name)
def test_kafka_python_v2_batch_decoded_by_ours(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=123, producer_epoch=4, base_sequence=10, batch_size=1 << 20,
    )
    samples = [_sample(i) for i in range(30)]
    for i, (ts, key, value, headers) in enumerate(samples):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    buf = builder.build()
    header = validate_log_entry(buf)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (123, 4, 10)
    assert header.record_count == 30 and header.last_offset == 29
    records = decode_entry_records(buf)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(samples)
    ]


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: c.name)
def test_our_v2_batch_decoded_by_kafka_python(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(
        compression=codec, base_offset=500, producer_id=9, producer_epoch=1, base_sequence=0,
        is_transactional=True, partition_leader_epoch=3,
    )
    samples = [_sample(i) for i in range(30)]
    for ts, key, value, headers in samples:
        builder.append(ts, key, value, headers)
    batch = DefaultRecordBatch(bytes(builder.build()))
    assert batch.validate_crc()
    assert batch.compression_type == codec and batch.is_transactional
    assert (batch.base_offset, batch.last_offset, batch.leader_epoch) == (500, 529, 3)
    assert batch.max_timestamp == max(s[0] for s in samples)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(500 + i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(samples)]


@pytest.mark.parametrize("magic, codec", LEGACY_PARAMS)
def test_kafka_python_legacy_set_decoded_by_ours(magic: int, codec: CompressionType) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    samples = [_sample(i) for i in range(20)]
    for i, (ts, key, value, _) in enumerate(samples):
        assert builder.append(i, timestamp=ts if magic else None, key=key, value=value) is not None
    buf = builder.build()
    entries = list(iter_log_entries(buf))
    assert {h.compression for _, h in entries} == {codec}
    records = []
    for pos, _ in entries:
        validate_log_entry(buf, pos)
        records.extend(decode_entry_records(buf, pos))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (i, ts if magic else -1, key, value) for i, (ts, key, value, _) in enumerate(samples)
    ]


@pytest.mark.parametrize("magic, codec", LEGACY_PARAMS)
def test_our_legacy_set_decoded_by_kafka_python(magic: int, codec: CompressionType) -> None:
    builder = RecordBatchBuilder(magic=magic, compression=codec, base_offset=40)
    samples = [_sample(i) for i in range(20)]
    for ts, key, value, _ in samples:
        builder.append(ts, key, value)
    records = MemoryRecords(bytes(builder.build()))
    got = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.magic == magic and batch.compression_type == codec
        assert batch.validate_crc()
        got.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    expected_ts = (lambda ts: ts) if magic else (lambda ts: None)
    assert got == [(40 + i, expected_ts(ts), key, value) for i, (ts, key, value, _) in enumerate(samples)]


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_memory_records_builder_output_decoded_by_ours(magic: int) -> None:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=CompressionType.GZIP, batch_size=1 << 20, offset=7)
    for i in range(10):
        builder.append(timestamp=1000 + i, key=None, value=b"payload " * 30)
    builder.close()
    buf = builder.buffer()
    records = [r for pos, _ in iter_log_entries(buf) for r in decode_entry_records(buf, pos)]
    assert [r.offset for r in records] == list(range(7, 17))
    assert all(r.value == b"payload " * 30 for r in records)


def test_our_control_batch_read_by_kafka_python() -> None:
    buf = build_control_batch(
        EndTransactionMarker(ControlRecordType.ABORT, 5),
        producer_id=77, producer_epoch=2, timestamp=1234, base_offset=9,
    )
    batch = DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.abort and record.version == 0 and record.offset == 9
