"""Random and mutated bytes given to every decoder raise only typed errors.

Anything but ProtocolError (CorruptRecordError is a subclass) escaping - IndexError,
struct.error, zlib.error, lz4/snappy/zstd errors, MemoryError - fails the test;
pytest-timeout guards against hangs.
"""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.exceptions import MalformedRecordError, ProtocolError
from protocol.records import batch
from protocol.records.builder import RecordBatchBuilder, build_control_batch
from protocol.records.compression import CompressionType, compress, decompress
from protocol.records.control import ControlRecordType, EndTransactionMarker, parse_control_type
from protocol.records.conversion import downconvert, recompress_batch, upconvert_to_v2
from protocol.records.log_entry import (
    decode_entry_records,
    iter_log_entries,
    read_log_entry,
    validate_log_entry,
)
from protocol.records.record import decode_records, encode_record, renumber_records, scan_records

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMIT = 1 << 20  # small decompression bound, so a mutated length cannot allocate much


def _seed(magic: int, codec: int) -> bytes:
    builder = RecordBatchBuilder(magic=magic, compression=codec, base_offset=10)
    for i in range(6):
        headers = [("h", b"v"), ("n", None)] if magic == 2 else ()
        builder.append(1000 + i, None if i == 2 else b"key%d" % i, None if i == 3 else b"value" * i, headers)
    return bytes(builder.build())


SEEDS = [
    _seed(magic, codec)
    for magic in (0, 1, 2)
    for codec in CompressionType
    if not (magic < 2 and codec == CompressionType.ZSTD)
] + [bytes(build_control_batch(EndTransactionMarker(ControlRecordType.COMMIT, 3), producer_id=1,
                               producer_epoch=0, timestamp=5))]


def _fix_checksums(buf: bytearray) -> None:
    """Make the outer CRC match again so mutations reach the inner decoders."""
    if len(buf) < 21:
        return
    if buf[16] == 2 and len(buf) >= batch.RECORD_BATCH_OVERHEAD:
        struct.pack_into(">I", buf, batch.CRC_OFFSET, crc32c(bytes(buf[batch.ATTRIBUTES_OFFSET :])))
    elif buf[16] in (0, 1):
        struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))


def _exercise(buf: bytes) -> None:
    """Every decoder over ``buf``; each may fail, but only with ProtocolError."""
    calls = [
        lambda: read_log_entry(buf),
        lambda: validate_log_entry(buf),
        lambda: [(p, h.base_offset, h.record_count, h.last_offset_delta) for p, h in iter_log_entries(buf)],
        lambda: decode_entry_records(buf, max_output=LIMIT),
        lambda: batch.count_records(buf),
        lambda: recompress_batch(buf, 0, CompressionType.GZIP, max_output=LIMIT),
        lambda: upconvert_to_v2(buf, max_output=LIMIT),
        lambda: downconvert(buf, 1, max_output=LIMIT),
        lambda: downconvert(buf, 0, max_output=LIMIT),
        lambda: decode_records(buf, 3, 0, 0),
        lambda: scan_records(buf, 3, timestamps=True),
        lambda: renumber_records(buf, 3),
        lambda: parse_control_type(buf),
        lambda: EndTransactionMarker.decode(buf[:4], buf[4:]),
    ]
    for call in calls:
        try:
            call()
        except ProtocolError:
            pass


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _exercise(data)


@FUZZ
@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.none() | st.integers(0, 10_000),
    fix=st.booleans(),
)
def test_mutated_batches(seed: bytes, edits: list[tuple[int, int]], cut: int | None, fix: bool) -> None:
    buf = bytearray(seed)
    for position, byte in edits:
        buf[position % len(buf)] = byte
    if cut is not None:
        del buf[cut % len(buf) :]
    if fix:
        _fix_checksums(buf)
    _exercise(bytes(buf))


@FUZZ
@given(seed=st.sampled_from(SEEDS), payload=st.binary(max_size=300), attributes=st.integers(0, 0x7F))
def test_batches_with_replaced_payload(seed: bytes, payload: bytes, attributes: int) -> None:
    """Valid framing and CRC around garbage record data, under every codec bit pattern."""
    buf = bytearray(seed[: batch.RECORD_BATCH_OVERHEAD] if seed[16] == 2 else seed[:16])
    if seed[16] == 2:
        buf += payload
        struct.pack_into(">i", buf, 8, len(buf) - batch.LOG_OVERHEAD)
        struct.pack_into(">h", buf, batch.ATTRIBUTES_OFFSET, attributes)
    else:
        body = struct.pack(">bb", seed[16], attributes & 0x0F)
        body += (b"\x00" * 8 if seed[16] == 1 else b"") + struct.pack(">i", -1) + struct.pack(">i", len(payload))
        buf = bytearray(struct.pack(">qiI", 0, len(body) + 4 + len(payload), 0) + body + payload)
    _fix_checksums(buf)
    _exercise(bytes(buf))


@FUZZ
@given(codec=st.integers(0, 7), magic=st.integers(0, 2), data=st.binary(max_size=300))
def test_decompress_garbage(codec: int, magic: int, data: bytes) -> None:
    try:
        decompress(codec, data, magic=magic, max_output=LIMIT)
    except ProtocolError:
        pass


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompress_mutated_streams(codec: int) -> None:
    good = compress(codec, b"abcdefgh" * 5000)

    @FUZZ
    @given(edits=st.lists(st.tuples(st.integers(0, len(good) - 1), st.integers(0, 255)), min_size=1, max_size=4))
    def run(edits: list[tuple[int, int]]) -> None:
        data = bytearray(good)
        for position, byte in edits:
            data[position] = byte
        try:
            decompress(codec, bytes(data), max_output=LIMIT)
        except ProtocolError:
            pass

    run()


@pytest.mark.parametrize("count", [1 << 24, (1 << 31) - 1])
def test_a_record_count_the_data_does_not_hold_costs_no_memory(count: int) -> None:
    """A produced batch's header may claim billions of records: the scan must fail on the data, never
    allocate by the claimed count (it once built a list that long, and the kernel killed the process)."""
    data = b"".join(encode_record(i, 0, b"k", b"v") for i in range(4))
    tracemalloc.start()
    try:
        for call in (lambda: scan_records(data, count), lambda: scan_records(data, count, timestamps=True, keys=True)):
            with pytest.raises(MalformedRecordError):
                call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
