"""Interoperability with aiokafka's record code (a separate, Cython-compiled implementation).

aiokafka refuses lz4 for magic 0 altogether, so that one pair is not in the matrix;
kafka-python covers it in test_records_kafka_python.py.
"""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from protocol.records.builder import RecordBatchBuilder
from protocol.records.compression import CompressionType
from protocol.records.log_entry import decode_entry_records, iter_log_entries, validate_log_entry

LEGACY_PAIRS = [
    (magic, codec)
    for magic in (0, 1)
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4)
    if not (magic == 0 and codec == CompressionType.LZ4)
]


def _samples(count: int = 25) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [
        (
            1_600_000_000_000 + 3 * i,
            None if i % 3 == 0 else b"k%d" % i,
            None if i == 4 else b"payload %d " % i * 15,
            [("h%d" % i, b"x"), ("none", None)] if i % 2 else [],
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_aiokafka_v2_batch_decoded_by_ours(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(2, codec, 0, 31, 2, 100, 1 << 20)
    samples = _samples()
    for i, (ts, key, value, headers) in enumerate(samples):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    buf = builder.build()
    header = validate_log_entry(buf)
    assert header.compression == codec and (header.producer_id, header.base_sequence) == (31, 100)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_entry_records(buf)] == [
        (i, *sample) for i, sample in enumerate(samples)
    ]


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_our_v2_batch_decoded_by_aiokafka(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(compression=codec, base_offset=1000)
    samples = _samples()
    for ts, key, value, headers in samples:
        builder.append(ts, key, value, headers)
    batch = DefaultRecordBatch(bytes(builder.build()))
    assert batch.validate_crc() and batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(1000 + i, *sample) for i, sample in enumerate(samples)]


@pytest.mark.parametrize("magic, codec", LEGACY_PAIRS)
def test_aiokafka_legacy_set_decoded_by_ours(magic: int, codec: CompressionType) -> None:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    samples = _samples(12)
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


@pytest.mark.parametrize("magic, codec", LEGACY_PAIRS)
def test_our_legacy_set_decoded_by_aiokafka(magic: int, codec: CompressionType) -> None:
    builder = RecordBatchBuilder(magic=magic, compression=codec, base_offset=20)
    samples = _samples(12)
    for ts, key, value, _ in samples:
        builder.append(ts, key, value)
    records = MemoryRecords(bytes(builder.build()))
    got = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        got.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    assert got == [(20 + i, ts if magic else None, key, value) for i, (ts, key, value, _) in enumerate(samples)]
