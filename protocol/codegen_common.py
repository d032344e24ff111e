"""Shared pieces of the codec generator: field classification and the source writer."""

from __future__ import annotations

import struct
from typing import Any, Optional

from protocol.schema import FIXED_FORMATS, FieldSpec, MessageSpec, default_value_source

FIXED_WIDTHS = {t: struct.calcsize(">" + fmt) for t, fmt in FIXED_FORMATS.items()}
_PREFIX_FORMATS = {"string": "h", "bytes": "i", "records": "i", "array": "i", "nullable_struct": "b"}
ARRAY_STRUCT_LIMIT = 64  # arrays of fixed-width elements shorter than this use precompiled Structs

# A run of fixed-width fields and the variable field after it (None at the end of a struct).
Group = tuple[list[FieldSpec], Optional[FieldSpec]]


def field_kind(f: FieldSpec) -> str:
    if f.is_array:
        return "array"
    if f.is_struct:
        return "struct"
    if f.type in FIXED_FORMATS:
        return "fixed"
    return f.type  # string, bytes, records


class SourceWriter:
    """Indented source lines plus the constants they reference."""

    def __init__(self, consts: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.consts = consts
        self._counter = 0

    def __call__(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def tmp(self, prefix: str = "t") -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def struct_const(self, fmt: str) -> tuple[str, str, int]:
        """Names of a precompiled Struct's pack_into and unpack_from, and its size."""
        compiled = struct.Struct(">" + fmt)
        key = fmt.replace("?", "Z").replace("16s", "U")
        self.consts[f"_P_{key}"] = compiled.pack_into
        self.consts[f"_U_{key}"] = compiled.unpack_from
        return f"_P_{key}", f"_U_{key}", compiled.size

    def array_consts(self, fmt: str) -> tuple[str, str]:
        """Names of tuples of pack_into/unpack_from for arrays of 0..63 ``fmt`` elements."""
        key = fmt.replace("?", "Z")
        if f"_AP_{key}" not in self.consts:
            if fmt.startswith("B"):  # one-byte count, then the elements
                structs = [struct.Struct(f">B{k}{fmt[1:]}") for k in range(ARRAY_STRUCT_LIMIT)]
            else:
                structs = [struct.Struct(f">{k}{fmt}") for k in range(ARRAY_STRUCT_LIMIT)]
            self.consts[f"_AP_{key}"] = tuple(s.pack_into for s in structs)
            self.consts[f"_AU_{key}"] = tuple(s.unpack_from for s in structs)
        return f"_AP_{key}", f"_AU_{key}"


class CodegenBase:
    """Per-(message, version) state and the questions every emitter asks about a field."""

    def __init__(self, spec: MessageSpec, version: int) -> None:
        self.spec = spec
        self.version = version
        self.flexible = version in spec.flexible
        self.consts: dict[str, Any] = {}
        self.out = SourceWriter(self.consts)
        self._done: set[str] = set()

    def is_tagged(self, f: FieldSpec) -> bool:
        if f.tag is None or self.version not in f.tagged:
            return False
        if not self.flexible:
            raise ValueError(f"{self.spec.name}.{f.name}: tagged at non-flexible version {self.version}")
        return True

    def compact(self, f: FieldSpec) -> bool:
        return self.flexible and (f.flexible is None or self.version in f.flexible)

    def nullable(self, f: FieldSpec) -> bool:
        return self.version in f.nullable

    def what(self, owner: str, f: FieldSpec) -> str:
        return f"{owner}.{f.name}"

    def _group(self, regular: list[FieldSpec]) -> list[Group]:
        """Split fields into (fixed run, following variable field or None) pairs.

        A non-compact variable field's fixed-width length prefix joins the run before it.
        """
        groups: list[Group] = []
        run: list[FieldSpec] = []
        for f in regular:
            if field_kind(f) == "fixed":
                run.append(f)
            else:
                groups.append((run, f))
                run = []
        if run:
            groups.append((run, None))
        return groups

    def prefix_format(self, f: FieldSpec | None) -> str:
        """Struct format of a variable field's fixed prefix ('' if none or compact)."""
        if f is None:
            return ""
        kind = field_kind(f)
        if kind == "struct":
            return _PREFIX_FORMATS["nullable_struct"] if self.nullable(f) else ""
        return "" if self.compact(f) else _PREFIX_FORMATS[kind]

    def group_format(self, run: list[FieldSpec], var: FieldSpec | None) -> str:
        return "".join(FIXED_FORMATS[f.type] for f in run) + self.prefix_format(var)

    def _is_set(self, f: FieldSpec, v: str) -> str:
        """Expression: value ``v`` of field ``f`` differs from the field's default."""
        default = default_value_source(f)
        if default == "None":
            return f"{v} is not None"
        if f.is_struct and not f.is_array:
            return f"not ({self._isdef_expr(f.element_type, v)})"
        return f"{v} != {default}"

    def _isdef_expr(self, name: str, v: str) -> str:
        """True when struct value ``v`` equals a default-constructed one (all fields, like Kafka)."""
        terms = [f"not {v}.unknown_tagged_fields"]
        for f in self.spec.structs[name].fields:
            default = default_value_source(f)
            value = f"{v}.{f.attr}"
            if default == "None":
                terms.append(f"{value} is None")
            elif f.is_struct and not f.is_array:
                terms.append(f"{value} is not None and {self._isdef_expr(f.element_type, value)}")
            else:
                terms.append(f"{value} == {default}")
        return " and ".join(terms)


def uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
