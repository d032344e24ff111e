"""Typed errors raised by the pure protocol code.

Decoders raise exactly these, never ``IndexError``/``struct.error``, so that the
network layer can answer or close one connection and keep serving the others.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Bytes that do not form a valid message of the expected kind and version."""


class UnsupportedVersionError(ProtocolError):
    """A request or message at a version this code does not know."""


class CorruptRecordError(ProtocolError):
    """A record batch or legacy message whose framing, CRC or contents are invalid."""


class UnsupportedCompressionError(CorruptRecordError):
    """A batch whose compression codec bits name no known codec."""


class MalformedRecordError(CorruptRecordError):
    """A v2 record whose fields do not add up to its length, or records that do not fill their batch
    exactly: where Kafka's record iteration throws InvalidRecordException (INVALID_RECORD on produce)."""
