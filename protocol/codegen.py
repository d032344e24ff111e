"""Python source generation for message classes and their per-version codecs.

For one message at one version this writes straight-line functions, per struct:
``size_X(o, hs)``, ``write_X(o, buf, pos, holes) -> pos`` and
``read_X(buf, pos, end) -> (obj, pos)``. Runs of fixed-width fields (plus the int16/int32
length prefix or nullable-struct marker that follows them) become one precompiled
``struct.Struct``; one-byte varints are inlined. The caller (``protocol.messages``)
execs the source once per (message, version) and caches the functions.

Conventions inside the generated code: ``buf`` is the input buffer (read; a memoryview
when records must be sliced from it) or a bytearray of exactly the encoded size (write);
``end`` is ``len(buf)``. Records values that are not bytes-like (file slices for
zero-copy sends) are "holes": ``size_X`` counts them in the size it returns and also
adds their length to ``hs[0]``; ``write_X`` skips them (the buffer is that much
shorter) and appends ``(position, source)`` to ``holes``.
"""

from __future__ import annotations

from protocol.codegen_decode import DecoderEmitter
from protocol.codegen_encode import EncoderEmitter
from protocol.schema import FieldSpec, MessageSpec, default_value_source


class VersionCodegen(EncoderEmitter, DecoderEmitter):
    """Generates every codec function one message needs at one version."""

    def generate(self) -> str:
        self._struct(self.spec.name, self.spec.fields)
        return "\n".join(self.out.lines) + "\n"

    def _struct(self, name: str, fields: list[FieldSpec]) -> None:
        if name in self._done:
            return
        self._done.add(name)
        present = [f for f in fields if self.version in f.versions]
        regular = [f for f in present if not self.is_tagged(f)]
        tagged = sorted((f for f in present if self.is_tagged(f)), key=lambda f: f.tag)
        absent = [f for f in fields if self.version not in f.versions]
        groups = self._group(regular)
        self._emit_size(name, groups, tagged)
        self._emit_write(name, groups, tagged, absent)
        self._emit_read(name, groups, tagged, absent)
        for f in present:
            if f.is_struct:
                self._struct(f.element_type, self.spec.structs[f.element_type].fields)

def class_source(spec: MessageSpec) -> str:
    """Source of the message class and its struct classes (without codecs)."""
    lines: list[str] = []
    for name, fields in [(spec.name, spec.fields)] + [(s.name, s.fields) for s in spec.structs.values()]:
        attrs = [f.attr for f in fields]
        lines.append(f"class {name}(_Base):")
        lines.append(f"    __slots__ = {tuple(attrs + ['unknown_tagged_fields'])!r}")
        lines.append(f"    _fields = {tuple(attrs)!r}")
        params = []
        body = []
        for f in fields:
            default = default_value_source(f)
            if default in ("[]",) or (f.is_struct and not f.is_array and default != "None"):
                params.append(f"{f.attr}=_MISSING")
                body.append(f"        self.{f.attr} = {default} if {f.attr} is _MISSING else {f.attr}")
            else:
                params.append(f"{f.attr}={default}")
                body.append(f"        self.{f.attr} = {f.attr}")
        params.append("unknown_tagged_fields=None")
        lines.append(f"    def __init__(self, *, {', '.join(params)}):")
        lines.extend(body)
        lines.append("        self.unknown_tagged_fields = {} if unknown_tagged_fields is None "
                     "else unknown_tagged_fields")
    return "\n".join(lines) + "\n"
