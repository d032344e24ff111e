"""Legacy message sets (magic 0 and 1): read, validate, decode and build.

A legacy log entry is ``offset int64, size int32, crc uint32, magic int8,
attributes int8, [timestamp int64 (magic 1)], key bytes, value bytes`` with a
CRC-32 (zlib) over magic..value. A compressed entry is a wrapper whose value is
the compressed bytes of an inner message set; see ON_DISK_FORMAT.md section 5.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Final, Optional

from protocol.exceptions import CorruptRecordError
from protocol.records.batch import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Buffer,
)
from protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    CompressionType,
    compress,
    compression_type,
    decompress,
)
from protocol.records.record import Record

CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
NO_TIMESTAMP_TYPE: Final = -1

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_CRC_START: Final = LOG_OVERHEAD + 4  # the CRC covers magic..end of value
MESSAGE_OVERHEAD = {0: 14, 1: 22}  # crc..value-length with null key and value


class _Message:
    """The parsed fields of one legacy entry (outer or inner); key and value are sliced on use."""

    __slots__ = ("_buf", "offset", "size", "crc", "magic", "attributes", "timestamp", "_key_span", "_value_span")

    def __init__(self, buf: Buffer, pos: int, limit: int) -> None:
        if limit - pos < LOG_OVERHEAD + 6:
            raise CorruptRecordError(f"legacy message at position {pos} is truncated")
        self._buf = buf
        self.offset, message_size, self.crc, self.magic, self.attributes = _PREFIX.unpack_from(buf, pos)
        if self.magic not in MESSAGE_OVERHEAD:
            raise CorruptRecordError(f"legacy message at position {pos} has magic {self.magic}")
        if message_size < MESSAGE_OVERHEAD[self.magic]:
            raise CorruptRecordError(
                f"legacy message at position {pos} has size {message_size}, "
                f"below the minimum {MESSAGE_OVERHEAD[self.magic]} for magic {self.magic}"
            )
        self.size = message_size + LOG_OVERHEAD
        end = pos + self.size
        if end > limit:
            raise CorruptRecordError(
                f"legacy message at position {pos} is truncated: size {message_size} runs past the data"
            )
        cursor = pos + LOG_OVERHEAD + 6
        if self.magic == 1:
            self.timestamp = _TIMESTAMP.unpack_from(buf, cursor)[0]
            cursor += 8
        else:
            self.timestamp = NO_TIMESTAMP
        self._key_span, cursor = _read_span(buf, cursor, end, pos)
        self._value_span, cursor = _read_span(buf, cursor, end, pos)
        if cursor != end:
            raise CorruptRecordError(
                f"legacy message at position {pos} has {end - cursor} bytes after its value"
            )

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def key(self) -> Optional[bytes]:
        return self._slice(self._key_span)

    @property
    def value(self) -> Optional[bytes]:
        return self._slice(self._value_span)

    def _slice(self, span: Optional[tuple[int, int]]) -> Optional[bytes]:
        return None if span is None else bytes(memoryview(self._buf)[span[0] : span[1]])


def _read_span(buf: Buffer, cursor: int, end: int, pos: int) -> tuple[Optional[tuple[int, int]], int]:
    """The (start, end) of a length-prefixed key or value, None when null."""
    if end - cursor < 4:
        raise CorruptRecordError(f"legacy message at position {pos} is truncated in its key/value")
    length = _INT32.unpack_from(buf, cursor)[0]
    cursor += 4
    if length == -1:
        return None, cursor
    if length < 0 or cursor + length > end:
        raise CorruptRecordError(f"legacy message at position {pos} has invalid key/value length {length}")
    return (cursor, cursor + length), cursor + length


def _check_crc(buf: Buffer, pos: int, message: _Message) -> None:
    actual = zlib.crc32(memoryview(buf)[pos + _CRC_START : pos + message.size])
    if actual != message.crc:
        raise CorruptRecordError(
            f"legacy message at position {pos} failed its CRC check: "
            f"stored {message.crc:#010x}, computed {actual:#010x}"
        )


class LegacyEntryHeader:
    """A magic 0/1 log entry seen through the same attribute names as batch.BatchHeader.

    ``base_offset`` and ``record_count`` of a compressed wrapper need the inner
    messages, so they are computed on first use.
    """

    is_control = False
    is_transactional = False
    has_delete_horizon = False
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH

    __slots__ = ("_message", "_buf", "_pos", "_records")

    def __init__(self, buf: Buffer, pos: int, message: _Message) -> None:
        self._message = message
        self._buf = buf
        self._pos = pos
        self._records: Optional[list[Record]] = None

    @property
    def magic(self) -> int:
        return self._message.magic

    @property
    def size(self) -> int:
        return self._message.size

    @property
    def batch_length(self) -> int:
        return self._message.size - LOG_OVERHEAD

    @property
    def crc(self) -> int:
        return self._message.crc

    @property
    def attributes(self) -> int:
        return self._message.attributes

    @property
    def compression(self) -> int:
        return self._message.compression

    @property
    def timestamp_type(self) -> int:
        """-1 (none) for magic 0, else 0 CreateTime / 1 LogAppendTime."""
        if self._message.magic == 0:
            return NO_TIMESTAMP_TYPE
        return (self._message.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def max_timestamp(self) -> int:
        return self._message.timestamp

    @property
    def last_offset(self) -> int:
        return self._message.offset

    @property
    def next_offset(self) -> int:
        return self._message.offset + 1

    @property
    def base_offset(self) -> int:
        if self._message.compression == CompressionType.NONE:
            return self._message.offset
        return self.records()[0].offset  # a wrapper holds at least one message

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def record_count(self) -> int:
        if self._message.compression == CompressionType.NONE:
            return 1
        return len(self.records())

    def records(self) -> list[Record]:
        """The decoded messages (cached), with absolute offsets."""
        if self._records is None:
            self._records = _decode(self._buf, self._pos, self._message, DEFAULT_MAX_DECOMPRESSED_SIZE)
        return self._records

    def __repr__(self) -> str:
        return (
            f"LegacyEntryHeader(magic={self.magic}, last_offset={self.last_offset}, size={self.size}, "
            f"compression={self.compression})"
        )


def read_legacy_header(buf: Buffer, pos: int = 0) -> LegacyEntryHeader:
    """Parse the legacy entry at ``pos``; checks framing, not the CRC."""
    return LegacyEntryHeader(buf, pos, _Message(buf, pos, len(buf)))


def validate_legacy_entry(buf: Buffer, pos: int = 0) -> LegacyEntryHeader:
    """Framing plus the outer CRC-32, as Kafka checks a legacy entry on append."""
    message = _Message(buf, pos, len(buf))
    _check_crc(buf, pos, message)
    return LegacyEntryHeader(buf, pos, message)


def decode_legacy_records(
    buf: Buffer, pos: int = 0, *, max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> list[Record]:
    """The messages of the entry at ``pos``: one, or the inner ones of a compressed wrapper."""
    return _decode(buf, pos, _Message(buf, pos, len(buf)), max_output)


def _decode(buf: Buffer, pos: int, wrapper: _Message, max_output: int) -> list[Record]:
    if wrapper.compression == CompressionType.NONE:
        return [Record(wrapper.offset, wrapper.timestamp, wrapper.key, wrapper.value)]
    compressed = wrapper.value
    if compressed is None:
        raise CorruptRecordError(f"compressed legacy wrapper at position {pos} has a null value")
    inner = decompress(
        compression_type(wrapper.compression), compressed, magic=wrapper.magic, max_output=max_output
    )
    messages: list[_Message] = []
    cursor = 0
    while cursor < len(inner):
        message = _Message(inner, cursor, len(inner))
        _check_crc(inner, cursor, message)
        if message.magic != wrapper.magic:
            raise CorruptRecordError(
                f"inner message magic {message.magic} differs from wrapper magic {wrapper.magic} "
                f"in the entry at position {pos}"
            )
        if message.compression != CompressionType.NONE:
            raise CorruptRecordError(f"legacy wrapper at position {pos} nests a compressed message")
        messages.append(message)
        cursor += message.size
    if not messages:
        raise CorruptRecordError(f"compressed legacy wrapper at position {pos} holds no messages")
    shift = _magic1_base_offset(pos, wrapper, messages[-1]) if wrapper.magic == 1 else 0
    log_append_time = wrapper.magic == 1 and bool(wrapper.attributes & TIMESTAMP_TYPE_MASK)
    return [
        Record(
            m.offset + shift,
            wrapper.timestamp if log_append_time else m.timestamp,
            m.key,
            m.value,
        )
        for m in messages
    ]


def _magic1_base_offset(pos: int, wrapper: _Message, last_inner: _Message) -> int:
    """Absolute offset of relative offset 0: the wrapper carries the last inner message's offset.

    As in Kafka, a wrapper offset of 0 (produce data from some librdkafka
    versions) means the relative offsets are used as they are.
    """
    if wrapper.offset == 0:
        return 0
    if wrapper.offset < last_inner.offset:
        raise CorruptRecordError(
            f"compressed v1 wrapper at position {pos} has offset {wrapper.offset}, "
            f"below its last inner offset {last_inner.offset}"
        )
    return wrapper.offset - last_inner.offset


# --- building ---------------------------------------------------------------

LegacyRecord = tuple[int, int, Optional[bytes], Optional[bytes]]  # offset, timestamp, key, value


def encode_legacy_entry(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: Optional[bytes],
    value: Optional[bytes],
) -> bytes:
    """One complete log entry (offset, size, crc, message)."""
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_TIMESTAMP.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(_INT32.pack(-1))
        else:
            parts.append(_INT32.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def build_message_set(
    magic: int,
    codec: int,
    base_offset: int,
    records: Sequence[LegacyRecord],
    log_append_time: Optional[int] = None,
) -> bytearray:
    """Entries for ``records``; one compressed wrapper when ``codec`` is not NONE.

    Magic 1 inner offsets are relative to ``base_offset`` and the wrapper carries
    the absolute offset of the last message; magic 0 inner offsets stay absolute.
    ``log_append_time`` (magic 1 only) stamps every message and the wrapper with it.
    """
    if magic not in MESSAGE_OVERHEAD:
        raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
    if log_append_time is not None and magic == 0:
        raise ValueError("magic 0 messages carry no timestamp")
    ts_attr = TIMESTAMP_TYPE_MASK if log_append_time is not None else 0
    out = bytearray()
    if not records:
        return out
    if codec == CompressionType.NONE:
        for offset, timestamp, key, value in records:
            stamp = log_append_time if log_append_time is not None else timestamp
            out += encode_legacy_entry(offset, magic, ts_attr, stamp, key, value)
        return out
    inner = bytearray()
    for offset, timestamp, key, value in records:
        stamp = log_append_time if log_append_time is not None else timestamp
        inner_offset = offset - base_offset if magic == 1 else offset
        inner += encode_legacy_entry(inner_offset, magic, ts_attr, stamp, key, value)
    if log_append_time is not None:
        wrapper_timestamp = log_append_time
    else:
        wrapper_timestamp = max((r[1] for r in records), default=NO_TIMESTAMP)
    wrapper_value = compress(codec, inner, magic=magic)
    out += encode_legacy_entry(records[-1][0], magic, codec | ts_attr, wrapper_timestamp, None, wrapper_value)
    return out
