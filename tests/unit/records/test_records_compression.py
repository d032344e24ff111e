"""Codecs framed as the Java client frames them (protocol/records/compression.py)."""

from __future__ import annotations

import gzip
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.exceptions import CorruptRecordError, UnsupportedCompressionError
from protocol.records.compression import (
    XERIAL_MAGIC,
    CompressionType,
    compress,
    compression_type,
    decompress,
    xxh32,
)

LEGAL = [(codec, magic) for codec in CompressionType for magic in (0, 1, 2) if not (codec == 4 and magic < 2)]
PAYLOAD = b"".join(b"record %d with some repetitive text; " % i for i in range(5000))


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=3000) | st.binary(max_size=20).map(lambda b: b * 5000))
@pytest.mark.parametrize("codec, magic", LEGAL)
def test_round_trip(codec: int, magic: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


def test_zstd_is_rejected_for_legacy_magic() -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(CompressionType.ZSTD, b"x", magic=1)
    with pytest.raises(UnsupportedCompressionError):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, b"x"), magic=0)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        compression_type(codec)
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"")


def test_xxh32_reference_values() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_snappy_uses_xerial_framing_and_accepts_raw_blocks() -> None:
    framed = compress(CompressionType.SNAPPY, PAYLOAD)
    assert framed[:8] == XERIAL_MAGIC
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    first_block = struct.unpack_from(">i", framed, 16)[0]
    assert snappy.decompress(framed[20 : 20 + first_block]) == PAYLOAD[: 32 * 1024]
    assert decompress(CompressionType.SNAPPY, snappy.compress(PAYLOAD)) == PAYLOAD


def test_snappy_concatenated_xerial_streams() -> None:
    data = compress(CompressionType.SNAPPY, b"abc") + compress(CompressionType.SNAPPY, b"def")
    assert decompress(CompressionType.SNAPPY, data) == b"abcdef"


def test_gzip_is_standard_and_concatenated_members_are_read() -> None:
    assert gzip.decompress(compress(CompressionType.GZIP, PAYLOAD)) == PAYLOAD
    assert decompress(CompressionType.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    assert decompress(CompressionType.GZIP, gzip.compress(b"ab") + b"\0\0") == b"ab"  # as GZIPInputStream


def test_lz4_frame_matches_kafka_settings() -> None:
    frame = compress(CompressionType.LZ4, PAYLOAD)
    info = lz4.frame.get_frame_info(frame)
    assert info["block_size"] == 64 * 1024 and not info["block_linked"]
    assert not info["content_checksum"] and info["content_size"] == 0
    assert lz4.frame.decompress(frame) == PAYLOAD
    # A standard frame with a content size (as librdkafka writes) decodes too.
    assert decompress(CompressionType.LZ4, lz4.frame.compress(PAYLOAD, store_size=True)) == PAYLOAD


def test_lz4_magic0_uses_the_kip57_broken_header_checksum() -> None:
    old = compress(CompressionType.LZ4, PAYLOAD, magic=0)
    new = compress(CompressionType.LZ4, PAYLOAD, magic=1)
    # Frame descriptor: magic(4) FLG BD HC; only the HC byte differs.
    assert old[:6] == new[:6] and old[7:] == new[7:]
    assert old[6] == (xxh32(old[:6]) >> 8) & 0xFF
    assert new[6] == (xxh32(new[4:6]) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(old)  # a standard reader rejects the old checksum
    assert decompress(CompressionType.LZ4, old, magic=0) == PAYLOAD
    assert decompress(CompressionType.LZ4, new, magic=0) == PAYLOAD  # magic 0 ignores the checksum


def test_zstd_frames_without_content_size_and_concatenated() -> None:
    streamer = zstandard.ZstdCompressor().compressobj()
    frame = streamer.compress(PAYLOAD) + streamer.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, frame) == PAYLOAD
    assert decompress(CompressionType.ZSTD, frame + frame) == PAYLOAD * 2


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_data_is_corrupt(codec: int) -> None:
    data = compress(codec, PAYLOAD)
    with pytest.raises(CorruptRecordError):
        decompress(codec, data[: len(data) // 2])
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"")


@pytest.mark.parametrize(
    "codec, bomb",
    [
        (CompressionType.GZIP, lambda n: gzip.compress(b"\0" * n)),
        (CompressionType.SNAPPY, lambda n: compress(CompressionType.SNAPPY, b"\0" * n)),
        (CompressionType.SNAPPY, lambda n: snappy.compress(b"\0" * n)),
        (CompressionType.LZ4, lambda n: lz4.frame.compress(b"\0" * n)),
        (CompressionType.ZSTD, lambda n: zstandard.ZstdCompressor().compress(b"\0" * n)),
    ],
)
def test_decompression_is_bounded(codec: int, bomb) -> None:
    data = bomb(4 * 1024 * 1024)
    assert len(data) < 256 * 1024
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        decompress(codec, data, max_output=1024 * 1024)
    assert len(decompress(codec, data, max_output=4 * 1024 * 1024)) == 4 * 1024 * 1024


def test_none_codec_respects_the_bound_too() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.NONE, b"abc", max_output=2)
