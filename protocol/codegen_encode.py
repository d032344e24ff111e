"""Source generation for ``size_X`` and ``write_X`` (see ``protocol.codegen``)."""

from __future__ import annotations

import struct

from protocol.codegen_common import (
    ARRAY_STRUCT_LIMIT,
    FIXED_WIDTHS,
    CodegenBase,
    Group,
    uvarint_bytes,
    field_kind,
)
from protocol.schema import FIXED_FORMATS, FieldSpec


class EncoderEmitter(CodegenBase):
    """Emits the sizing and writing functions of one struct."""

    # -- size -------------------------------------------------------------------------------
    def _emit_size(self, name: str, groups: list[Group], tagged: list[FieldSpec]) -> None:
        w = self.out
        const = sum(struct.calcsize(">" + self.group_format(run, var)) for run, var in groups)
        w(0, f"def size_{name}(o, hs):")
        w(1, f"n = {const}")
        for _run, var in groups:
            if var is not None:
                v = w.tmp("v")
                w(1, f"{v} = o.{var.attr}")
                self._size_value(1, var, v, "n", self.compact(var), self.nullable(var), prefix=False)
        if self.flexible:
            self._size_tagged(name, tagged)
        w(1, "return n")

    def _size_value(self, ind: int, f: FieldSpec, v: str, acc: str, compact: bool, nullable: bool,
                    prefix: bool) -> None:
        """Add the encoded size of value ``v`` to ``acc``.

        ``prefix`` says whether fixed-width prefixes must be counted here (they are part of
        the group constant otherwise). Compact prefixes are always counted here.
        """
        w = self.out
        kind = field_kind(f)
        if kind == "fixed":
            w(ind, f"{acc} += {FIXED_WIDTHS[f.type]}")
            return
        if kind == "struct":
            if nullable:
                if prefix:
                    w(ind, f"{acc} += 1")
                w(ind, f"if {v} is not None:")
                w(ind + 1, f"{acc} += size_{f.element_type}({v}, hs)")
            else:
                w(ind, f"{acc} += size_{f.element_type}({v}, hs)")
            return
        fixed_prefix = 2 if kind == "string" else 4
        if nullable:
            if compact or prefix:
                w(ind, f"if {v} is None:")
                w(ind + 1, f"{acc} += {1 if compact else fixed_prefix}")
                w(ind, "else:")
            else:
                w(ind, f"if {v} is not None:")
            ind += 1
        k = w.tmp("k")
        if kind == "string":
            w(ind, f"{k} = len({v}) if {v}.isascii() else len({v}.encode('utf-8'))")
        else:
            w(ind, f"{k} = len({v})")
        if compact:
            w(ind, f"{acc} += 1 if {k} < 127 else _uvs({k} + 1)")
        elif prefix:
            w(ind, f"{acc} += {fixed_prefix}")
        if kind == "array":
            self._size_elements(ind, f, v, k, acc, compact)
        else:
            w(ind, f"{acc} += {k}")
            if kind == "records":
                w(ind, f"if type({v}) not in _BUFFER_TYPES:")
                w(ind + 1, f"hs[0] += {k}")

    def _size_elements(self, ind: int, f: FieldSpec, v: str, k: str, acc: str, compact: bool) -> None:
        w = self.out
        et = f.element_type
        if f.is_struct:
            e = w.tmp("e")
            w(ind, f"for {e} in {v}:")
            w(ind + 1, f"{acc} += size_{et}({e}, hs)")
        elif et in FIXED_WIDTHS:
            w(ind, f"{acc} += {FIXED_WIDTHS[et]} * {k}")
        else:
            e, ek = w.tmp("e"), w.tmp("k")
            w(ind, f"for {e} in {v}:")
            if et == "string":
                w(ind + 1, f"{ek} = len({e}) if {e}.isascii() else len({e}.encode('utf-8'))")
            else:
                w(ind + 1, f"{ek} = len({e})")
            if compact:
                w(ind + 1, f"{acc} += {ek} + (1 if {ek} < 127 else _uvs({ek} + 1))")
            else:
                w(ind + 1, f"{acc} += {ek} + {2 if et == 'string' else 4}")

    def _size_tagged(self, name: str, tagged: list[FieldSpec]) -> None:
        w = self.out
        w(1, "unk = o.unknown_tagged_fields")
        if not tagged:
            w(1, "if unk:")
            w(2, "n += _unk_size(unk) + _uvs(len(unk))")
            w(1, "else:")
            w(2, "n += 1")
            return
        w(1, "cnt = len(unk)")
        w(1, "if unk:")
        w(2, "n += _unk_size(unk)")
        for f in tagged:
            v, k = w.tmp("v"), w.tmp("k")
            w(1, f"{v} = o.{f.attr}")
            w(1, f"if {self._is_set(f, v)}:")
            w(2, "cnt += 1")
            w(2, f"{k} = 0")
            self._size_value(2, f, v, k, True, self.nullable(f), prefix=True)
            w(2, f"n += {len(uvarint_bytes(f.tag))} + {k} + (1 if {k} < 128 else _uvs({k}))")
        w(1, "n += 1 if cnt < 128 else _uvs(cnt)")

    # -- write ------------------------------------------------------------------------------
    def _emit_write(self, name: str, groups: list[Group], tagged: list[FieldSpec], absent: list[FieldSpec]) -> None:
        w = self.out
        w(0, f"def write_{name}(o, buf, pos, holes):")
        i = 0
        while i < len(groups):
            j = i
            while j < len(groups) and self._packable_array(groups[j][1]):
                j += 1
            if j < len(groups) and groups[j][1] is None:
                j += 1  # the trailing fixed run joins the segment
            if sum(var is not None for _run, var in groups[i:j]) >= 2:
                self._write_segment(groups[i:j])
                i = j
            else:
                self._write_group(1, *groups[i])
                i += 1
        if self.flexible:
            self._write_tagged(tagged)
        else:
            w(1, "if o.unknown_tagged_fields:")
            where = name if name == self.spec.name else f"{self.spec.name}.{name}"
            w(2, f"raise _dropped({where + ' unknown tagged fields'!r}, {self.version})")
        for f in absent:
            if not f.ignorable:  # Kafka refuses to drop a set value silently
                w(1, f"if {self._is_set(f, f'o.{f.attr}')}:")
                where = self.what(name, f) if name == self.spec.name else f"{self.spec.name}.{self.what(name, f)}"
                w(2, f"raise _dropped({where!r}, {self.version})")
        w(1, "return pos")

    def _packable_array(self, f: FieldSpec | None) -> bool:
        """A non-null array of fixed-width elements (which a segment can pack in one call)."""
        return (f is not None and f.is_array and f.element_type in FIXED_FORMATS
                and f.element_type != "uuid" and not self.nullable(f))

    def _write_segment(self, groups: list[Group]) -> None:
        """Several fixed runs and short fixed-element arrays packed with one Struct.

        The Struct depends on the array lengths, so it comes from a small cache keyed by
        them; long arrays fall back to packing group by group.
        """
        w = self.out
        template = []
        args: list[str] = []
        lengths: list[str] = []
        const = 0
        for run, var in groups:
            run_fmt = "".join(FIXED_FORMATS[f.type] for f in run)
            args.extend(f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}" for f in run)
            const += struct.calcsize(">" + run_fmt)
            if var is None:
                template.append((run_fmt, "", ""))
                continue
            a, k = w.tmp("a"), w.tmp("k")
            w(1, f"{a} = o.{var.attr}")
            w(1, f"{k} = len({a})")
            compact = self.compact(var)
            template.append((run_fmt, "B" if compact else "i", FIXED_FORMATS[var.element_type]))
            args.extend([f"{k} + 1" if compact else k, f"*{a}"])
            const += 1 if compact else 4
            lengths.append((k, FIXED_WIDTHS[var.element_type]))
        cache = w.tmp("_SEG")
        self.consts[cache] = {}
        key = " | ".join(f"{k} << {6 * n}" if n else k for n, (k, _width) in enumerate(lengths))
        w(1, f"if {' and '.join(f'{k} < {ARRAY_STRUCT_LIMIT}' for k, _w in lengths)}:")
        w(2, f"key = {key}")
        w(2, f"p = {cache}.get(key)")
        w(2, "if p is None:")
        w(3, f"p = _segment({cache}, {tuple(template)!r}, key)")
        w(2, f"p(buf, pos, {', '.join(args)})")
        w(2, f"pos += {const} + {' + '.join(f'{width} * {k}' for k, width in lengths)}")
        w(1, "else:")
        for run, var in groups:
            self._write_group(2, run, var)

    def _write_group(self, ind: int, run: list[FieldSpec], var: FieldSpec | None) -> None:
        """A fixed run (with the following field's fixed prefix), then that field."""
        w = self.out
        fmt = self.group_format(run, var)
        args = [f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}" for f in run]
        v = None
        if var is not None:
            v = w.tmp("v")
            w(ind, f"{v} = o.{var.attr}")
        pfmt = self.prefix_format(var)
        k = b = None
        if pfmt:
            k = w.tmp("k")
            kind = field_kind(var)
            if kind == "string":
                b = w.tmp("b")
                if self.nullable(var):
                    w(ind, f"if {v} is None:")
                    w(ind + 1, f"{b} = None")
                    w(ind + 1, f"{k} = -1")
                    w(ind, "else:")
                    w(ind + 1, f"{b} = {v}.encode('utf-8')")
                    w(ind + 1, f"{k} = len({b})")
                else:
                    w(ind, f"{b} = {v}.encode('utf-8')")
                    w(ind, f"{k} = len({b})")
            elif kind == "struct":
                w(ind, f"{k} = -1 if {v} is None else 1")
            elif self.nullable(var):
                w(ind, f"{k} = -1 if {v} is None else len({v})")
            else:
                w(ind, f"{k} = len({v})")
            args.append(k)
        if fmt:
            pack, _unpack, size = w.struct_const(fmt)
            w(ind, f"{pack}(buf, pos, {', '.join(args)})")
            w(ind, f"pos += {size}")
        if var is not None:
            if pfmt:
                self._write_body_after_prefix(ind, var, v, k, b)
            else:
                self._write_value(ind, var, v, self.compact(var), self.nullable(var))

    def _write_body_after_prefix(self, ind: int, f: FieldSpec, v: str, k: str, b: str | None) -> None:
        """The part of a non-compact field (or nullable struct) after its fixed prefix."""
        w = self.out
        kind = field_kind(f)
        nullable = self.nullable(f)
        if nullable:
            w(ind, f"if {b if kind == 'string' else v} is not None:")
            ind += 1
        if kind == "string":
            w(ind, f"buf[pos:pos + {k}] = {b}")
            w(ind, f"pos += {k}")
        elif kind == "struct":
            w(ind, f"pos = write_{f.element_type}({v}, buf, pos, holes)")
        else:
            self._write_payload(ind, f, v, k, compact=False)

    def _write_payload(self, ind: int, f: FieldSpec, v: str, k: str, compact: bool) -> None:
        """Bytes, records or array elements, once the length prefix is written."""
        w = self.out
        kind = field_kind(f)
        if kind == "bytes":
            w(ind, f"buf[pos:pos + {k}] = {v}")
            w(ind, f"pos += {k}")
        elif kind == "records":
            w(ind, f"if type({v}) in _BUFFER_TYPES:")
            w(ind + 1, f"buf[pos:pos + {k}] = {v}")
            w(ind + 1, f"pos += {k}")
            w(ind, "else:")
            w(ind + 1, f"holes.append((pos, {v}))")
        else:
            self._write_elements(ind, f, v, k, compact)

    def _write_elements(self, ind: int, f: FieldSpec, v: str, k: str, compact: bool) -> None:
        w = self.out
        et = f.element_type
        e = w.tmp("e")
        if f.is_struct:
            w(ind, f"for {e} in {v}:")
            w(ind + 1, f"pos = write_{et}({e}, buf, pos, holes)")
        elif et == "uuid":
            w(ind, f"for {e} in {v}:")
            w(ind + 1, f"buf[pos:pos + 16] = {e}.bytes")
            w(ind + 1, "pos += 16")
        elif et in FIXED_FORMATS:
            packs, _unpacks = w.array_consts(FIXED_FORMATS[et])
            w(ind, f"if {k} < {ARRAY_STRUCT_LIMIT}:")
            w(ind + 1, f"{packs}[{k}](buf, pos, *{v})")
            w(ind, "else:")
            w(ind + 1, f"_pack_into('>%d{FIXED_FORMATS[et]}' % {k}, buf, pos, *{v})")
            w(ind, f"pos += {FIXED_WIDTHS[et]} * {k}")
        else:
            eb, ek = w.tmp("b"), w.tmp("k")
            w(ind, f"for {e} in {v}:")
            w(ind + 1, f"{eb} = {e}.encode('utf-8')" if et == "string" else f"{eb} = {e}")
            w(ind + 1, f"{ek} = len({eb})")
            self._write_length(ind + 1, ek, compact, "h" if et == "string" else "i")
            w(ind + 1, f"buf[pos:pos + {ek}] = {eb}")
            w(ind + 1, f"pos += {ek}")

    def _write_length(self, ind: int, k: str, compact: bool, fmt: str) -> None:
        w = self.out
        if compact:
            w(ind, f"if {k} < 127:")
            w(ind + 1, f"buf[pos] = {k} + 1")
            w(ind + 1, "pos += 1")
            w(ind, "else:")
            w(ind + 1, f"pos = _wuv(buf, pos, {k} + 1)")
        else:
            pack, _u, size = w.struct_const(fmt)
            w(ind, f"{pack}(buf, pos, {k})")
            w(ind, f"pos += {size}")

    def _write_value(self, ind: int, f: FieldSpec, v: str, compact: bool, nullable: bool) -> None:
        """A whole value with its own prefix (compact fields and tagged values)."""
        w = self.out
        kind = field_kind(f)
        if kind == "fixed":
            pack, _u, size = w.struct_const(FIXED_FORMATS[f.type])
            w(ind, f"{pack}(buf, pos, {v}.bytes)" if f.type == "uuid" else f"{pack}(buf, pos, {v})")
            w(ind, f"pos += {size}")
            return
        if kind == "struct":
            if nullable:
                w(ind, f"if {v} is None:")
                w(ind + 1, "buf[pos] = 255")
                w(ind + 1, "pos += 1")
                w(ind, "else:")
                w(ind + 1, "buf[pos] = 1")
                w(ind + 1, f"pos = write_{f.element_type}({v}, buf, pos + 1, holes)")
            else:
                w(ind, f"pos = write_{f.element_type}({v}, buf, pos, holes)")
            return
        fmt = "h" if kind == "string" else "i"
        if nullable:
            w(ind, f"if {v} is None:")
            if compact:
                w(ind + 1, "buf[pos] = 0")
                w(ind + 1, "pos += 1")
            else:
                pack, _u, size = w.struct_const(fmt)
                w(ind + 1, f"{pack}(buf, pos, -1)")
                w(ind + 1, f"pos += {size}")
            w(ind, "else:")
            ind += 1
        k = w.tmp("k")
        if kind == "string":
            b = w.tmp("b")
            w(ind, f"{b} = {v}.encode('utf-8')")
            w(ind, f"{k} = len({b})")
            self._write_length(ind, k, compact, fmt)
            w(ind, f"buf[pos:pos + {k}] = {b}")
            w(ind, f"pos += {k}")
        elif compact and kind == "array" and f.element_type in FIXED_FORMATS and f.element_type != "uuid":
            # Count byte and elements in one precompiled pack for short arrays.
            efmt = FIXED_FORMATS[f.element_type]
            packs, _unpacks = w.array_consts("B" + efmt)
            w(ind, f"{k} = len({v})")
            w(ind, f"if {k} < {ARRAY_STRUCT_LIMIT}:")
            w(ind + 1, f"{packs}[{k}](buf, pos, {k} + 1, *{v})")
            w(ind + 1, f"pos += 1 + {FIXED_WIDTHS[f.element_type]} * {k}")
            w(ind, "else:")
            self._write_length(ind + 1, k, compact, fmt)
            w(ind + 1, f"_pack_into('>%d{efmt}' % {k}, buf, pos, *{v})")
            w(ind + 1, f"pos += {FIXED_WIDTHS[f.element_type]} * {k}")
        else:
            w(ind, f"{k} = len({v})")
            self._write_length(ind, k, compact, fmt)
            self._write_payload(ind, f, v, k, compact)

    def _write_tagged(self, tagged: list[FieldSpec]) -> None:
        w = self.out
        w(1, "unk = o.unknown_tagged_fields")
        if not tagged:
            w(1, "if unk:")
            w(2, "pos = _wuv(buf, pos, len(unk))")
            w(2, "pos = _wunk(buf, pos, unk, 0, 1 << 32)")
            w(1, "else:")
            w(2, "buf[pos] = 0")
            w(2, "pos += 1")
            return
        w(1, "hs = [0]  # tagged values are sized again here; they never hold records")
        names = []
        for f in tagged:
            v, c = w.tmp("v"), w.tmp("c")
            w(1, f"{v} = o.{f.attr}")
            w(1, f"{c} = {self._is_set(f, v)}  # Kafka omits tagged fields at their default")
            names.append((f, v, c))
        w(1, f"cnt = len(unk) + {' + '.join(c for _f, _v, c in names)}")
        w(1, "if cnt < 128:")
        w(2, "buf[pos] = cnt")
        w(2, "pos += 1")
        w(1, "else:")
        w(2, "pos = _wuv(buf, pos, cnt)")
        lo = 0
        for f, v, c in names:
            if f.tag > lo:
                w(1, "if unk:")
                w(2, f"pos = _wunk(buf, pos, unk, {lo}, {f.tag})")
            w(1, f"if {c}:")
            tag_bytes = uvarint_bytes(f.tag)
            for byte in tag_bytes:
                w(2, f"buf[pos] = {byte}")
                w(2, "pos += 1")
            k = w.tmp("k")
            w(2, f"{k} = 0")
            self._size_value(2, f, v, k, True, self.nullable(f), prefix=True)
            w(2, f"pos = _wuv(buf, pos, {k})")
            self._write_value(2, f, v, True, self.nullable(f))
            lo = f.tag + 1
        w(1, "if unk:")
        w(2, f"pos = _wunk(buf, pos, unk, {lo}, 1 << 32)")
