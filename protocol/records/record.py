"""Records inside a v2 batch: zig-zag varint framing, encode and decode.

Decoding is strict in the way Kafka's DefaultRecord is: every record must use
exactly the bytes its length prefix announces, header keys must not be null,
and a batch must hold exactly ``recordCount`` records with nothing after them.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable
from typing import Optional, Union

from protocol.exceptions import CorruptRecordError, MalformedRecordError
from protocol.records.batch import (
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
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


try:  # aiokafka's record reader, compiled (Cython): the checks of Kafka's DefaultRecord.readFrom at C speed
    from aiokafka.record._crecords import DefaultRecordBatch as CompiledRecordBatch
except ImportError:  # no compiled extension on this platform: the walk in Python does it all
    CompiledRecordBatch = None

# A v2 batch header in front of bare records, for the compiled reader: base offset and timestamp 0, so
# that each record's offset and timestamp are its deltas; no compression, no producer.
_BARE_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET = operator.attrgetter("offset")
_OFFSET_KEY_TIMESTAMP = operator.attrgetter("offset", "key", "timestamp")


class RecordScan:
    """What the produce-side record checks need from one batch's records: whether the offset deltas
    run 0..count-1 and, when asked for, which records have no key and every timestamp delta."""

    __slots__ = ("consecutive", "keyless", "timestamp_deltas")

    def __init__(self, consecutive: bool, keyless: list[int], timestamp_deltas: list[int]) -> None:
        self.consecutive = consecutive
        self.keyless = keyless
        self.timestamp_deltas = timestamp_deltas


def scan_records(data: BytesLike, count: int, *, timestamps: bool = False, keys: bool = False) -> RecordScan:
    """Walk ``count`` records filling ``data`` exactly, each read as Kafka's DefaultRecord.readFrom
    reads it (length, attributes, timestamp and offset deltas, key, value, headers): whether the
    offset deltas run 0..count-1 and, when asked for, which records have no key (``keys``) and
    every timestamp delta (``timestamps``).

    Raises ``MalformedRecordError`` where Kafka's record iteration throws InvalidRecordException:
    a record whose fields do not add up to its length, a negative header count or header key size,
    records running past the batch or bytes left after the last one. The produce path calls this
    for every batch: aiokafka's compiled reader walks batches of two records or more (about a
    tenth of a microsecond a record against 0.6-0.9 for the walk in Python), and whatever it
    refuses is walked again in Python, whose answer counts (it is Kafka's where the two differ,
    e.g. header keys that are not UTF-8, which Java reads without complaint)."""
    if CompiledRecordBatch is not None and count > 1:
        header = _BARE_BATCH_HEADER.pack(0, len(data) + 49, -1, 2, 0, 0, count - 1, 0, 0, -1, -1, -1, count)
        scan = _scan_compiled(header + data, count, timestamps, keys, 0, 0)
        if scan is not None:
            return scan
    return _walk_records(data, count, timestamps, keys)


def scan_batch_records(buf: Buffer, pos: int, header: BatchHeader, *, timestamps: bool = False, keys: bool = False,
                       max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> RecordScan:
    """``scan_records`` of the v2 batch at ``pos`` (``header`` read there): an uncompressed batch is
    read where it lies, without copying it (a megabyte copied twice cost more than reading it)."""
    count = header.record_count
    if header.compression != CompressionType.NONE:
        data = batch_record_data(buf, pos, header=header, max_output=max_output)
        return scan_records(data, count, timestamps=timestamps, keys=keys)
    end = pos + header.size
    if CompiledRecordBatch is not None and count > 1:
        scan = _scan_compiled(memoryview(buf)[pos:end], count, timestamps, keys, header.base_offset,
                              header.base_timestamp)
        if scan is not None:
            return scan
    return _walk_records(buf, count, timestamps, keys, pos + RECORD_BATCH_OVERHEAD, end)


def _scan_compiled(batch: BytesLike, count: int, timestamps: bool, keys: bool, base_offset: int,
                   base_timestamp: int) -> RecordScan | None:
    """``scan_records`` of the uncompressed v2 ``batch`` by aiokafka's reader, which gives offsets and
    timestamps as base + delta; None where it raises (the walk then decides)."""
    assert CompiledRecordBatch is not None
    records = CompiledRecordBatch(batch)
    try:
        if not (timestamps or keys):
            offsets = list(map(_OFFSET, records))
            fields = []
        else:
            fields = list(map(_OFFSET_KEY_TIMESTAMP, records))
            offsets = [offset for offset, _, _ in fields]
    except Exception:  # noqa: BLE001 - CorruptRecordException, UnicodeDecodeError...: the walk answers
        return None
    if len(offsets) != count:
        return None  # a count the data does not hold: the walk answers (nothing sized by the count itself)
    return RecordScan(offsets == list(range(base_offset, base_offset + count)),
                      [index for index, (_, key, _) in enumerate(fields) if key is None] if keys else [],
                      [(-1 if timestamp is None else timestamp) - base_timestamp for _, _, timestamp in fields]
                      if timestamps else [])


def _walk_records(data: BytesLike, count: int, timestamps: bool, keys: bool, start: int = 0,
                  limit: int | None = None) -> RecordScan:
    """``scan_records`` of ``data[start:limit]`` in Python, the one- and two-byte varints decoded inline;
    the reference answer."""
    consecutive = True
    keyless: list[int] = []
    deltas: list[int] = []
    pos = start
    if limit is None:
        limit = len(data)
    index = 0
    expected_delta = 0  # the record's index, zig-zag encoded
    try:
        for index in range(count):
            byte = data[pos]  # the length, then the attributes skipped
            if byte < 0x80:
                end = pos + 1 + ((byte >> 1) ^ -(byte & 1))
                pos += 2
            elif data[pos + 1] < 0x80 and not byte & 1:  # records of 64 B to 8 KiB
                end = pos + 2 + (((byte & 0x7F) | (data[pos + 1] << 7)) >> 1)
                pos += 3
            else:
                length, pos = read_varint(data, pos)
                end = pos + length
                pos += 1
            if end > limit or end < pos:
                raise MalformedRecordError(f"Invalid record size: record {index} at {pos} runs past the batch "
                                           f"({limit - pos} remaining bytes) or has no attributes")
            if timestamps:
                timestamp_delta, pos = read_varint(data, pos)
                deltas.append(timestamp_delta)
            elif data[pos] < 0x80:
                pos += 1
            else:
                pos = _skip_varint(data, pos)
            byte = data[pos]  # the offset delta
            if byte < 0x80:
                pos += 1
                if byte != expected_delta:
                    consecutive = False
            else:
                offset_delta, pos = read_varint(data, pos)
                if offset_delta != index:
                    consecutive = False
            expected_delta += 2
            byte = data[pos]  # the key size; a negative one is a null key
            if byte < 0x80:
                if byte & 1:
                    keyless.append(index)
                    pos += 1
                else:
                    pos += 1 + (byte >> 1)
            else:
                size, pos = read_varint(data, pos)
                if size < 0:
                    keyless.append(index)
                else:
                    pos += size
            byte = data[pos]  # the value size; a negative one is a null value
            if byte < 0x80:
                pos += 1 if byte & 1 else 1 + (byte >> 1)
            elif data[pos + 1] < 0x80 and not byte & 1:  # values of 64 B to 8 KiB
                pos += 2 + (((byte & 0x7F) | (data[pos + 1] << 7)) >> 1)
            else:
                size, pos = read_varint(data, pos)
                if size > 0:
                    pos += size
            if data[pos] == 0:  # no headers
                pos += 1
            else:
                pos = _skip_headers(data, pos, end)
            if pos != end:
                raise MalformedRecordError(f"Invalid record size: record {index}'s fields end {pos - end:+d} bytes "
                                           "from where its length says")
    except IndexError:
        raise MalformedRecordError(f"Found invalid record structure: record {index} is truncated") from None
    except MalformedRecordError:
        raise
    except CorruptRecordError as exc:  # a varint over ten bytes
        raise MalformedRecordError(f"Found invalid record structure: {exc}") from None
    if pos != limit:
        raise MalformedRecordError(f"Incorrect declared batch size, records still remaining: {limit - pos} bytes "
                                   f"after the batch's {count} records")
    return RecordScan(consecutive, keyless if keys else [], deltas)


def _skip_varint(data: BytesLike, pos: int) -> int:
    while data[pos] >= 0x80:
        pos += 1
    return pos + 1


def _skip_headers(data: BytesLike, pos: int, end: int) -> int:
    """Past a record's headers, checked as Kafka's readHeaders checks them."""
    count, pos = read_varint(data, pos)
    if count < 0:
        raise MalformedRecordError(f"Found invalid number of record headers {count}")
    if count > end - pos:
        raise MalformedRecordError(f"Found invalid number of record headers. {count} is larger than the remaining "
                                   "size of the record")
    for _ in range(count):
        key_size, pos = read_varint(data, pos)
        if key_size < 0:
            raise MalformedRecordError(f"Invalid negative header key size {key_size}")
        value_size, pos = read_varint(data, pos + key_size)
        if value_size > 0:
            pos += value_size
    return pos


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


def batch_record_data(buf: Buffer, pos: int = 0, *, max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
                      header: BatchHeader | None = None) -> bytes:
    """The uncompressed record bytes of the v2 batch at ``pos`` (whose ``header`` the caller may have read)."""
    if header is None:
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
