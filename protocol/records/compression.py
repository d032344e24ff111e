"""Record compression codecs, framed exactly as the Java client frames them.

Every decompressor is bounded by ``max_output`` so that a small hostile batch
cannot expand into gigabytes (a decompression bomb); going past the bound, or
any codec failure, raises CorruptRecordError. Third-party codec exceptions never
leak out of this module.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import Final, Union

import lz4.frame
import snappy
import zstandard

from protocol.exceptions import CorruptRecordError, UnsupportedCompressionError

Buffer = Union[bytes, bytearray, memoryview]

DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 256 * 1024 * 1024
_CHUNK: Final = 1 << 20  # streaming step for codecs that can stop mid-frame
_ZSTD_STEP: Final = 2048  # compressed bytes fed to zstd per step


class CompressionType(IntEnum):
    """The codec in bits 0-2 of the batch (or legacy message) attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def compression_type(codec: int) -> CompressionType:
    """Map attribute codec bits to the enum; 5-7 are invalid as in Kafka."""
    try:
        return CompressionType(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec id {codec}") from None


def compress(codec: int, data: Buffer, *, magic: int = 2) -> bytes:
    """Compress an inner record set with ``codec`` as the Java producer would."""
    ctype = compression_type(codec)
    if ctype is CompressionType.NONE:
        return bytes(data)
    if ctype is CompressionType.GZIP:
        gz = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return gz.compress(data) + gz.flush()
    if ctype is CompressionType.SNAPPY:
        return _xerial_compress(data)
    if ctype is CompressionType.LZ4:
        return _lz4_compress(data, magic)
    if magic < 2:
        raise UnsupportedCompressionError(f"zstd is not allowed with magic {magic}")
    return zstandard.ZstdCompressor(level=3).compress(data)


def decompress(
    codec: int,
    data: Buffer,
    *,
    magic: int = 2,
    max_output: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress an inner record set; at most ``max_output`` bytes are produced."""
    ctype = compression_type(codec)
    if ctype is CompressionType.NONE:
        if len(data) > max_output:
            raise CorruptRecordError(f"record data of {len(data)} bytes exceeds {max_output}")
        return bytes(data)
    try:
        if ctype is CompressionType.GZIP:
            return _gzip_decompress(data, max_output)
        if ctype is CompressionType.SNAPPY:
            return _snappy_decompress(data, max_output)
        if ctype is CompressionType.LZ4:
            return _lz4_decompress(data, magic, max_output)
        if magic < 2:
            raise UnsupportedCompressionError(f"zstd is not allowed with magic {magic}")
        return _zstd_decompress(data, max_output)
    except CorruptRecordError:
        raise
    except Exception as exc:  # codec libraries raise assorted types; report them uniformly
        raise CorruptRecordError(f"{ctype.name.lower()} data is corrupt: {exc!r}") from exc


def _too_large(max_output: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed record data exceeds the limit of {max_output} bytes")


# --- gzip -------------------------------------------------------------------


_GZIP_MAGIC: Final = b"\x1f\x8b"


def _gzip_decompress(data: Buffer, max_output: int) -> bytes:
    """Concatenated gzip members are accepted, as Java's GZIPInputStream does."""
    out = bytearray()
    pending = bytes(data)
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = inflater.decompress(pending, max_output + 1 - len(out))
        out += chunk
        if len(out) > max_output or inflater.unconsumed_tail:
            raise _too_large(max_output)
        if not inflater.eof:
            raise CorruptRecordError("gzip data is truncated")
        pending = inflater.unused_data
        if not pending.startswith(_GZIP_MAGIC):  # Java also ignores trailing non-gzip bytes
            return bytes(out)


# --- snappy -----------------------------------------------------------------

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_SIZE: Final = 32 * 1024  # snappy-java's SnappyOutputStream default
_INT32 = struct.Struct(">i")


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_length(block: Buffer) -> int:
    """The uncompressed length a raw snappy block announces in its varint preamble."""
    result = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return result
    raise CorruptRecordError("snappy block has an invalid length preamble")


def _snappy_raw_decompress(block: Buffer, budget: int, max_output: int) -> bytes:
    if _snappy_raw_length(block) > budget:
        raise _too_large(max_output)
    return snappy.decompress(bytes(block))


def _snappy_decompress(data: Buffer, max_output: int) -> bytes:
    """xerial-framed (Java) or a single raw block (other clients)."""
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        return _snappy_raw_decompress(view, max_output, max_output)
    out = bytearray()
    pos = 0
    end = len(view)
    while pos < end:
        # snappy-java accepts concatenated streams: a header may reappear between blocks.
        if bytes(view[pos : pos + 8]) == XERIAL_MAGIC:
            if end - pos < _XERIAL_HEADER.size:
                raise CorruptRecordError("xerial snappy header is truncated")
            pos += _XERIAL_HEADER.size
            continue
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length is truncated")
        length = _INT32.unpack_from(view, pos)[0]
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes runs past the data")
        out += _snappy_raw_decompress(view[pos : pos + length], max_output - len(out), max_output)
        pos += length
    return bytes(out)


# --- lz4 --------------------------------------------------------------------

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_FLG_CONTENT_SIZE: Final = 0x08
_FLG_DICT_ID: Final = 0x01


def _lz4_compress(data: Buffer, magic: int) -> bytes:
    """Kafka's framing: 64 KiB independent blocks, no content size, no checksums."""
    frame = lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if magic == 0:
        frame = _with_header_checksum(frame, broken=True)
    return frame


def _lz4_decompress(data: Buffer, magic: int, max_output: int) -> bytes:
    if magic == 0:
        # KIP-57: magic 0 writers hashed the frame magic into the header checksum;
        # Kafka ignores that checksum, so we recompute it before handing over the frame.
        data = _with_header_checksum(bytes(data), broken=False)
    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = bytearray(decompressor.decompress(data, max_length=min(_CHUNK, max_output + 1)))
    while not decompressor.eof and not decompressor.needs_input and len(out) <= max_output:
        out += decompressor.decompress(b"", max_length=min(_CHUNK, max_output + 1 - len(out)))
    if len(out) > max_output:
        raise _too_large(max_output)
    if not decompressor.eof:
        raise CorruptRecordError("lz4 frame is truncated")
    return bytes(out)


def _with_header_checksum(frame: bytes, *, broken: bool) -> bytes:
    """Rewrite the frame descriptor's checksum byte (HC), the correct or the KIP-57 way."""
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4 data does not start with a frame header")
    flg = frame[4]
    hc_pos = 6 + (8 if flg & _FLG_CONTENT_SIZE else 0) + (4 if flg & _FLG_DICT_ID else 0)
    if len(frame) <= hc_pos:
        raise CorruptRecordError("lz4 frame header is truncated")
    covered = frame[:hc_pos] if broken else frame[4:hc_pos]
    checksum = (xxh32(covered) >> 8) & 0xFF
    return frame[:hc_pos] + bytes((checksum,)) + frame[hc_pos + 1 :]


_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393
_M32: Final = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, needed only for the few bytes of an LZ4 frame descriptor."""
    length = len(data)
    pos = 0
    if length >= 16:
        lanes = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= length:
            for i in range(4):
                word = int.from_bytes(data[pos : pos + 4], "little")
                lanes[i] = (_rotl((lanes[i] + word * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        acc = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + length) & _M32
    while pos + 4 <= length:
        word = int.from_bytes(data[pos : pos + 4], "little")
        acc = (_rotl((acc + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < length:
        acc = (_rotl((acc + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


# --- zstd -------------------------------------------------------------------


def _zstd_decompress(data: Buffer, max_output: int) -> bytes:
    """Frames without a content size and concatenated frames both work.

    Input is fed in small steps so one step can expand to at most ~64 MiB
    (128 KiB per 4-byte RLE block) before the size check runs.
    """
    dctx = zstandard.ZstdDecompressor()
    view = memoryview(data)
    out = bytearray()
    decompressor = None
    pos = 0
    while pos < len(view) or (decompressor is not None and decompressor.unused_data):
        if decompressor is None or decompressor.eof:
            pending = decompressor.unused_data if decompressor is not None else b""
            decompressor = dctx.decompressobj()
            if pending:
                out += decompressor.decompress(pending)
                if len(out) > max_output:
                    raise _too_large(max_output)
                continue
        out += decompressor.decompress(view[pos : pos + _ZSTD_STEP])
        pos += _ZSTD_STEP
        if len(out) > max_output:
            raise _too_large(max_output)
    if decompressor is None or not decompressor.eof:
        raise CorruptRecordError("zstd frame is truncated")
    return bytes(out)
