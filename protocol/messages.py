"""Every Kafka protocol message as a Python class, built from the bundled schemas.

``from protocol.messages import ProduceRequest`` builds the classes of that one JSON
file on first access (module ``__getattr__``); nested structs are attributes of the
message class by their JSON struct name (``ProduceRequest.PartitionProduceData``).
Field attributes are the snake_case JSON names.

Codecs are generated per (message, version) on first use (see ``protocol.codegen``)
and cached on the classes. Value conventions:

- ``uuid`` fields are ``uuid.UUID`` (Kafka's zero UUID, ``ZERO_UUID``, by default);
- ``bytes`` fields decode to ``bytes``; ``records`` fields decode to a zero-copy
  ``memoryview`` slice of the input (writable if the input was a bytearray) or None,
  and encode from any bytes-like value or any object with ``__len__`` and
  ``read_bytes()`` (e.g. a file slice; see ``encode_parts``);
- ``encode`` returns the ``bytearray`` it packed into, whose size was computed first;
- unknown tagged fields are kept in ``unknown_tagged_fields`` and written back;
- like Kafka, encoding refuses (``UnsupportedVersionError``) a non-default value in a
  non-ignorable field the version lacks, or unknown tagged fields at a non-flexible
  version; ignorable fields are silently left out;
- ``decode`` rejects trailing bytes; ``decode_from`` returns where the message ended.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Union

from protocol import wire
from protocol.codegen import VersionCodegen, class_source
from protocol.exceptions import ProtocolError, UnsupportedVersionError
from protocol.schema import ZERO_UUID, MessageSpec, load_message, schema_names

Buffer = Union[bytes, bytearray, memoryview]
Codec = tuple[Callable[..., int], Callable[..., int], Callable[..., Any]]

_MISSING: Any = object()
_BUFFER_TYPES = frozenset({bytes, bytearray, memoryview})
_ZERO_UUID_BYTES = bytes(16)


_UUIDS: dict[bytes, uuid.UUID] = {}  # topic ids decoded so far: few, and in every fetch
_MAX_CACHED_UUIDS = 65_536


def _uuid(raw: bytes) -> uuid.UUID:
    found = _UUIDS.get(raw)
    if found is None:
        if len(_UUIDS) >= _MAX_CACHED_UUIDS:  # ids that are not topics' (random input): start over
            _UUIDS.clear()
        found = _UUIDS[raw] = ZERO_UUID if raw == _ZERO_UUID_BYTES else uuid.UUID(bytes=raw)
    return found


# Names the generated codec source may refer to.
_RUNTIME: dict[str, Any] = {
    "_new": object.__new__,
    "_uvs": wire.uvarint_size,
    "_wuv": wire.write_uvarint,
    "_ruv": wire.read_uvarint,
    "_unk_size": wire.unknown_tags_size,
    "_wunk": wire.write_unknown_tags,
    "_read_unknown": wire.read_unknown_tags,
    "_short": wire.short_buffer,
    "_bad_length": wire.bad_length,
    "_tag_size": wire.tag_size_mismatch,
    "_dropped": wire.dropped_field,
    "_segment": wire.segment_packer,
    "_uuid": _uuid,
    "ZERO_UUID": ZERO_UUID,
    "_BUFFER_TYPES": _BUFFER_TYPES,
    "_pack_into": struct.pack_into,
    "_unpack_from": struct.unpack_from,
}

_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError)
_ENCODE_ERRORS = (struct.error, AttributeError, TypeError, ValueError, OverflowError, IndexError)


def _records_bytes(source: Any) -> bytes:
    read_bytes = getattr(source, "read_bytes", None)
    data = read_bytes() if read_bytes is not None else bytes(source)
    if len(data) != len(source):
        raise ProtocolError(f"records source yielded {len(data)} bytes, expected {len(source)}")
    return data


class Message:
    """Base of every generated message and struct class."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _spec: ClassVar[MessageSpec]
    _codecs: ClassVar[dict[int, Codec]]
    _has_records: ClassVar[bool]
    unknown_tagged_fields: dict[int, bytes]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.unknown_tagged_fields == other.unknown_tagged_fields and all(
            getattr(self, a) == getattr(other, a) for a in self._fields
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = []
        for a in self._fields:
            value = getattr(self, a)
            parts.append(f"{a}=<{len(value)} bytes>" if isinstance(value, memoryview) else f"{a}={value!r}")
        if self.unknown_tagged_fields:
            parts.append(f"unknown_tagged_fields={self.unknown_tagged_fields!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    @classmethod
    def _codec(cls, version: int) -> Codec:
        try:
            return cls._codecs[version]
        except KeyError:
            return _compile(cls, version)

    def encoded_size(self, version: int) -> int:
        size = self._codec(version)[0]
        try:
            return size(self, [0])
        except _ENCODE_ERRORS as exc:
            raise self._encode_error(version, exc) from exc

    def _pack(self, version: int) -> tuple[bytearray, list[tuple[int, Any]]]:
        """Pack into an exactly sized buffer; non-bytes-like records are left out as holes."""
        size, write, _read = self._codec(version)
        holes: list[tuple[int, Any]] = []
        hole_bytes = [0]
        try:
            n = size(self, hole_bytes) - hole_bytes[0]
            buf = bytearray(n)
            end = write(self, buf, 0, holes)
        except ProtocolError:
            raise
        except _ENCODE_ERRORS as exc:
            raise self._encode_error(version, exc) from exc
        if end != n:  # a value changed between sizing and writing
            raise ProtocolError(f"{type(self).__qualname__} v{version}: sized {n} bytes but wrote {end}")
        return buf, holes

    def encode(self, version: int) -> bytearray:
        """The encoding at ``version``: a bytearray of exactly ``encoded_size(version)``."""
        buf, holes = self._pack(version)
        if not holes:
            return buf
        out = bytearray()
        prev = 0
        for pos, source in holes:
            out += memoryview(buf)[prev:pos]
            out += _records_bytes(source)
            prev = pos
        out += memoryview(buf)[prev:]
        return out

    def encode_parts(self, version: int) -> list[Any]:
        """Like ``encode`` but non-bytes-like records values are their own list items.

        Everything else is in as few bytes-like parts as possible (one if no holes).
        """
        buf, holes = self._pack(version)
        if not holes:
            return [buf]
        view = memoryview(buf)
        parts: list[Any] = []
        prev = 0
        for pos, source in holes:
            if pos > prev:
                parts.append(view[prev:pos])
            parts.append(source)
            prev = pos
        if prev < len(buf):
            parts.append(view[prev:])
        return parts

    @classmethod
    def decode(cls, buf: Buffer, version: int, offset: int = 0) -> Any:
        """Decode ``buf[offset:]`` as one whole message; trailing bytes are an error.

        Passing the frame and the body's offset (rather than a memoryview slice) lets
        messages without records fields index the bytes directly, which is faster.
        """
        obj, end = cls.decode_from(buf, offset, version)
        if end != len(buf):
            raise ProtocolError(f"{cls.__qualname__} v{version}: {len(buf) - end} unexpected trailing bytes")
        return obj

    @classmethod
    def decode_from(cls, buf: Buffer, offset: int, version: int) -> tuple[Any, int]:
        """Decode one message starting at ``offset``; return it and the offset after it."""
        read = cls._codec(version)[2]
        if type(buf) is memoryview:
            view = buf if buf.itemsize == 1 and buf.ndim == 1 else buf.cast("B")
        elif cls._has_records or not isinstance(buf, (bytes, bytearray)):
            view = memoryview(buf)  # records decode to slices of it
        else:
            view = buf  # indexing bytes is faster than indexing a memoryview
        try:
            return read(view, offset, len(view))
        except ProtocolError as exc:
            raise ProtocolError(f"{cls.__qualname__} v{version}: {exc}") from None
        except _DECODE_ERRORS as exc:
            kind = "invalid UTF-8" if isinstance(exc, UnicodeDecodeError) else "truncated or malformed"
            raise ProtocolError(f"{cls.__qualname__} v{version}: {kind} input ({exc})") from None

    def _encode_error(self, version: int, exc: Exception) -> ProtocolError:
        return ProtocolError(f"cannot encode {type(self).__qualname__} v{version}: {exc}")


def _compile(cls: type[Message], version: int) -> Codec:
    spec = cls._spec
    if version not in spec.valid:
        raise UnsupportedVersionError(
            f"{spec.name} has no version {version} (valid {spec.valid.lo}-{spec.valid.hi})"
        )
    classes = _build_classes(spec.name)
    gen = VersionCodegen(spec, version)
    source = gen.generate()
    namespace = {**_RUNTIME, **gen.consts, **classes}
    exec(compile(source, f"<protocol codec {spec.name} v{version}>", "exec"), namespace)
    for name, klass in classes.items():
        if f"read_{name}" in namespace:
            klass._codecs[version] = (namespace[f"size_{name}"], namespace[f"write_{name}"],
                                      namespace[f"read_{name}"])
    try:
        return cls._codecs[version]
    except KeyError:
        raise UnsupportedVersionError(f"{cls.__qualname__} is not part of {spec.name} v{version}") from None


_BUILT: dict[str, dict[str, type[Message]]] = {}


def _build_classes(name: str) -> dict[str, type[Message]]:
    """The message class and its struct classes, by JSON name (built once)."""
    built = _BUILT.get(name)
    if built is not None:
        return built
    spec = load_message(name)
    namespace: dict[str, Any] = {"_Base": Message, "_MISSING": _MISSING, "ZERO_UUID": ZERO_UUID}
    exec(compile(class_source(spec), f"<protocol classes {name}>", "exec"), namespace)
    classes = {n: namespace[n] for n in [spec.name, *spec.structs]}
    top = classes[spec.name]
    has_records = any(f.type == "records" for f in spec.fields) or any(
        f.type == "records" for s in spec.structs.values() for f in s.fields)
    for struct_name, klass in classes.items():
        klass._spec = spec
        klass._has_records = has_records
        klass._codecs = {}
        klass.__module__ = __name__
        if klass is not top:
            klass.__qualname__ = f"{spec.name}.{struct_name}"
            setattr(top, struct_name, klass)
    return _BUILT.setdefault(name, classes)


def message_class(name: str) -> type[Message]:
    """The class for a JSON message name such as ``"FetchRequest"``."""
    return _build_classes(name)[name]


def all_message_names() -> list[str]:
    return schema_names()


def __getattr__(name: str) -> type[Message]:
    if name[:1].isupper():
        try:
            klass = message_class(name)
        except KeyError:
            pass
        else:
            globals()[name] = klass
            return klass
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
