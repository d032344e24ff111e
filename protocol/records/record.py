"""Records inside a v2 batch: zig-zag varint framing, encode and decode.

Decoding is strict in the way Kafka's DefaultRecord is: every record must use
exactly the bytes its length prefix announces, header keys must not be null,
and a batch must hold exactly ``recordCount`` records with nothing after them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional, Union

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import (
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    Buffer,
    read_batch_header,
)
from protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionType,
    decompress,
)

Header = tuple[str, Optional[bytes]]
BytesLike = Union[bytes, bytearray, memoryview]

MAX_VARINT_BYTES = 10


class Record:
    """One decoded record with absolute offset and timestamp."""

    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: Optional[bytes],
        value: Optional[bytes],
        headers: Optional[list[Header]] = None,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers if headers is not None else []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and self.headers == other.headers
        )

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


# --- varints ----------------------------------------------------------------


def _encode_varint_uncached(value: int) -> bytes:
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


_CACHED_VARINTS = tuple(_encode_varint_uncached(v) for v in range(-1, 4096))  # lengths and small deltas


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong (the same bytes for both when the value fits)."""
    if -1 <= value < 4095:
        return _CACHED_VARINTS[value + 1]
    return _encode_varint_uncached(value)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint at ``pos``; returns (value, next position).

    Raises IndexError when the buffer ends mid-varint; callers translate it.
    """
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            result &= 0xFFFFFFFFFFFFFFFF  # a 10th byte may carry bits past 64; Java drops them
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 7 * MAX_VARINT_BYTES:
            raise CorruptRecordError(f"varint longer than {MAX_VARINT_BYTES} bytes at {pos}")


def _append_sized(out: bytearray, value: Optional[BytesLike]) -> None:
    if value is None:
        out += b"\x01"  # zig-zag -1
    else:
        out += encode_varint(len(value))
        out += value


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: Optional[BytesLike],
    value: Optional[BytesLike],
    headers: Iterable[Header] = (),
) -> bytes:
    """One record with its length prefix, as it sits inside a v2 batch."""
    body = bytearray(b"\x00")  # attributes
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    _append_sized(body, key)
    _append_sized(body, value)
    if not headers:
        body += b"\x00"
    else:
        headers = list(headers)
        body += encode_varint(len(headers))
        for header_key, header_value in headers:
            if header_key is None:
                raise ValueError("record header keys must not be null")
            _append_sized(body, header_key.encode("utf-8", "surrogateescape"))
            _append_sized(body, header_value)
    return encode_varint(len(body)) + body


# --- decoding ---------------------------------------------------------------


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: Optional[int] = None,
) -> list[Record]:
    """Decode exactly ``count`` records from ``data`` (the batch's uncompressed record bytes).

    ``log_append_time`` replaces every record's timestamp, as readers of a
    LogAppendTime batch must. Single-byte varints, the common case, are decoded
    inline; this is the one per-record loop of the package.
    """
    records: list[Record] = []
    append = records.append
    pos = 0
    limit = len(data)
    try:
        for _ in range(count):
            if pos >= limit:
                raise CorruptRecordError(
                    f"batch declares {count} records but its data ends after {len(records)}"
                )
            byte = data[pos]
            if byte < 0x80:
                length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < 0 or end > limit:
                raise CorruptRecordError(f"record of {length} bytes at {pos} runs past the batch data")
            pos += 1  # attributes, unused
            timestamp_delta, pos = read_varint(data, pos)
            byte = data[pos]
            if byte < 0x80:
                offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                offset_delta, pos = read_varint(data, pos)
            key, pos = _read_sized(data, pos, end)
            value, pos = _read_sized(data, pos, end)
            if data[pos] == 0 and pos + 1 == end:  # no headers: the usual last byte
                headers: list[Header] = []
                pos = end
            else:
                headers, pos = _read_headers(data, pos, end)
            if pos != end:
                raise CorruptRecordError(
                    f"record declared {length} bytes but its fields used {length + pos - end}"
                )
            append(
                Record(
                    base_offset + offset_delta,
                    base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise CorruptRecordError(f"record at {pos} is truncated") from None
    if pos != limit:
        raise CorruptRecordError(f"{limit - pos} bytes remain after the batch's {count} records")
    return records


def _read_headers(data: bytes, pos: int, end: int) -> tuple[list[Header], int]:
    header_count, pos = read_varint(data, pos)
    if header_count < 0:
        raise CorruptRecordError(f"record has negative header count {header_count}")
    headers: list[Header] = []
    for _ in range(header_count):
        header_key, pos = _read_sized(data, pos, end)
        if header_key is None:
            raise CorruptRecordError("record header has a null key")
        header_value, pos = _read_sized(data, pos, end)
        headers.append((header_key.decode("utf-8", "surrogateescape"), header_value))
    return headers, pos


class RecordScan:
    """What the produce-side record checks need from one batch's records, read without copying
    keys or values: whether the offset deltas run 0..count-1, which records have no key, and
    (when asked for) every timestamp delta."""

    __slots__ = ("consecutive", "keyless", "timestamp_deltas")

    def __init__(self, consecutive: bool, keyless: list[int], timestamp_deltas: list[int]) -> None:
        self.consecutive = consecutive
        self.keyless = keyless
        self.timestamp_deltas = timestamp_deltas


def scan_records(data: bytes, count: int, *, timestamps: bool = False) -> RecordScan:
    """One pass over the leading fields of ``count`` records (length, attributes, timestamp and
    offset deltas, key length), checking that they fill ``data`` exactly.

    The produce path calls this for every compressed batch, so two-byte lengths (records under
    8 KiB) are decoded inline and each offset delta is compared, still encoded, with the one the
    record's index should have."""
    consecutive = True
    keyless: list[int] = []
    deltas: list[int] = []
    cached = _CACHED_VARINTS
    pos = 0
    limit = len(data)
    index = 0
    try:
        for index in range(count):
            byte = data[pos]
            if byte < 0x80:
                length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif data[pos + 1] < 0x80:
                zigzag = (byte & 0x7F) | (data[pos + 1] << 7)
                length, pos = (zigzag >> 1) ^ -(zigzag & 1), pos + 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length <= 0 or end > limit:
                raise CorruptRecordError(f"record {index} has invalid length {length} at {pos}")
            pos += 1  # attributes
            if timestamps:
                timestamp_delta, pos = read_varint(data, pos)
                deltas.append(timestamp_delta)
            else:
                while data[pos] >= 0x80:
                    pos += 1
                pos += 1
            expected = cached[index + 1] if index < 4095 else encode_varint(index)
            if data[pos:pos + len(expected)] != expected:
                consecutive = False
            while data[pos] >= 0x80:
                pos += 1
            pos += 1
            if pos >= end:
                raise CorruptRecordError(f"record {index} of {length} bytes ends inside its fields")
            if data[pos] == 1:  # zig-zag -1: a null key
                keyless.append(index)
            pos = end
    except IndexError:
        raise CorruptRecordError(f"record {index} is truncated") from None
    if pos != limit:
        raise CorruptRecordError(f"{limit - pos} bytes remain after the batch's {count} records")
    return RecordScan(consecutive, keyless, deltas)


def renumber_records(data: bytes, count: int) -> bytes:
    """The records with offset deltas 0..count-1 (everything else as it was), as Kafka rebuilds a
    batch whose inner offsets are not consecutive."""
    out = bytearray()
    for index, record in enumerate(decode_records(data, count, 0, 0)):
        out += encode_record(index, record.timestamp, record.key, record.value, record.headers)
    return bytes(out)


def _read_sized(data: bytes, pos: int, end: int) -> tuple[Optional[bytes], int]:
    byte = data[pos]
    if byte < 0x80:
        length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    else:
        length, pos = read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid negative field length {length}")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"field of {length} bytes at {pos} runs past its record")
    return data[pos : pos + length], pos + length


def batch_record_data(buf: Buffer, pos: int = 0, *, max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """The uncompressed record bytes of the v2 batch at ``pos``."""
    header = read_batch_header(buf, pos)
    data = memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : pos + header.size]
    if header.compression == CompressionType.NONE:
        return bytes(data)
    return decompress(header.compression, data, magic=2, max_output=max_output)


def decode_batch_records(
    buf: Buffer, pos: int = 0, *, max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> list[Record]:
    """All records of the v2 batch at ``pos`` with absolute offsets and timestamps."""
    header = read_batch_header(buf, pos)
    data = batch_record_data(buf, pos, max_output=max_output)
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    return decode_records(data, header.record_count, header.base_offset, header.base_timestamp, log_append_time)
