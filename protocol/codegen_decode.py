"""Source generation for ``read_X`` (see ``protocol.codegen``)."""

from __future__ import annotations

from protocol.codegen_common import ARRAY_STRUCT_LIMIT, FIXED_WIDTHS, CodegenBase, Group, field_kind
from protocol.schema import FIXED_FORMATS, FieldSpec, default_value_source


class DecoderEmitter(CodegenBase):
    """Emits the reading function of one struct."""

    # -- read -------------------------------------------------------------------------------
    def _emit_read(self, name: str, groups: list[Group], tagged: list[FieldSpec], absent: list[FieldSpec]) -> None:
        w = self.out
        w(0, f"def read_{name}(buf, pos, end):")
        w(1, f"o = _new({name})")
        for run, var in groups:
            fmt = self.group_format(run, var)
            targets = []
            conversions = []
            for f in run:
                if f.type == "uuid":
                    t = w.tmp("u")
                    targets.append(t)
                    conversions.append(f"o.{f.attr} = _uuid({t})")
                else:
                    targets.append(f"o.{f.attr}")
            k = None
            if self.prefix_format(var):
                k = w.tmp("k")
                targets.append(k)
            if fmt:
                _pack, unpack, size = w.struct_const(fmt)
                target = ", ".join(targets) + ("," if len(targets) == 1 else "")
                w(1, f"{target} = {unpack}(buf, pos)")
                w(1, f"pos += {size}")
                for line in conversions:
                    w(1, line)
            if var is not None:
                what = self.what(name, var)
                if k is not None:
                    self._read_after_prefix(1, var, f"o.{var.attr}", k, what)
                else:
                    self._read_value(1, var, f"o.{var.attr}", self.compact(var), self.nullable(var), what)
        for f in absent + tagged:
            w(1, f"o.{f.attr} = {default_value_source(f)}")
        w(1, "o.unknown_tagged_fields = {}")
        if self.flexible:
            self._read_tagged(name, tagged)
        w(1, "return o, pos")

    def _read_length(self, ind: int, k: str, compact: bool, fmt: str) -> None:
        w = self.out
        if compact:
            w(ind, f"{k} = buf[pos]")
            w(ind, f"if {k} < 128:")
            w(ind + 1, "pos += 1")
            w(ind, "else:")
            w(ind + 1, f"{k}, pos = _ruv(buf, pos)")
            w(ind, f"{k} -= 1")
        else:
            _p, unpack, size = w.struct_const(fmt)
            w(ind, f"{k}, = {unpack}(buf, pos)")
            w(ind, f"pos += {size}")

    def _read_after_prefix(self, ind: int, f: FieldSpec, target: str, k: str, what: str) -> None:
        """Read a field body whose length (or null marker) is already in ``k``."""
        w = self.out
        kind = field_kind(f)
        if kind == "struct":
            w(ind, f"if {k} < 0:")
            w(ind + 1, f"{target} = None")
            w(ind, "else:")
            w(ind + 1, f"{target}, pos = read_{f.element_type}(buf, pos, end)")
            return
        w(ind, f"if {k} < 0:")
        if self.nullable(f):
            w(ind + 1, f"if {k} != -1:")
            w(ind + 2, f"raise _bad_length({what!r}, {k})")
            w(ind + 1, f"{target} = None")
        else:
            w(ind + 1, f"raise _bad_length({what!r}, {k})")
        w(ind, "else:")
        self._read_payload(ind + 1, f, target, k, self.compact(f), what)

    def _read_payload(self, ind: int, f: FieldSpec, target: str, k: str, compact: bool, what: str) -> None:
        """Read ``k`` bytes (or elements) of a non-null variable value into ``target``."""
        w = self.out
        kind = field_kind(f)
        if kind == "array":
            self._read_elements(ind, f, target, k, compact, what)
            return
        e = w.tmp("p")
        w(ind, f"{e} = pos + {k}")
        w(ind, f"if {e} > end:")
        w(ind + 1, f"raise _short({what!r}, {k}, end - pos)")
        if kind == "string":
            w(ind, f"if {k} > 32767:")
            w(ind + 1, f"raise _bad_length({what!r}, {k})")
            w(ind, f"{target} = str(buf[pos:{e}], 'utf-8')")
        elif kind == "bytes":
            w(ind, f"{target} = bytes(buf[pos:{e}])")
        else:
            w(ind, f"{target} = buf[pos:{e}]")
        w(ind, f"pos = {e}")

    def _read_elements(self, ind: int, f: FieldSpec, target: str, k: str, compact: bool, what: str) -> None:
        w = self.out
        et = f.element_type
        w(ind, f"if {k} > end - pos:")
        w(ind + 1, f"raise _short({what!r}, {k}, end - pos)")
        if et in FIXED_FORMATS and et != "uuid":
            width = FIXED_WIDTHS[et]
            _packs, unpacks = w.array_consts(FIXED_FORMATS[et])
            w(ind, f"{target} = list({unpacks}[{k}](buf, pos) if {k} < {ARRAY_STRUCT_LIMIT} "
                   f"else _unpack_from('>%d{FIXED_FORMATS[et]}' % {k}, buf, pos))")
            w(ind, f"pos += {width} * {k}")
            return
        lst, e = w.tmp("l"), w.tmp("e")
        w(ind, f"{lst} = []")
        w(ind, f"for _ in range({k}):")
        if f.is_struct:
            w(ind + 1, f"{e}, pos = read_{et}(buf, pos, end)")
        elif et == "uuid":
            w(ind + 1, f"{e} = _uuid(bytes(buf[pos:pos + 16]))")
            w(ind + 1, "pos += 16")
        else:
            ek = w.tmp("k")
            self._read_length(ind + 1, ek, compact, "h" if et == "string" else "i")
            w(ind + 1, f"if {ek} < 0:")
            w(ind + 2, f"raise _bad_length({what + '[]'!r}, {ek})")
            element = FieldSpec(f.name, f.attr, et, f.versions, f.nullable, f.tagged, None, f.flexible,
                                f.ignorable, None)
            self._read_payload(ind + 1, element, e, ek, compact, what + "[]")
        w(ind + 1, f"{lst}.append({e})")
        w(ind, f"{target} = {lst}")

    def _read_value(self, ind: int, f: FieldSpec, target: str, compact: bool, nullable: bool, what: str) -> None:
        """A whole value with its own prefix (compact fields and tagged values)."""
        w = self.out
        kind = field_kind(f)
        if kind == "fixed":
            _p, unpack, size = w.struct_const(FIXED_FORMATS[f.type])
            if f.type == "uuid":
                t = w.tmp("u")
                w(ind, f"{t}, = {unpack}(buf, pos)")
                w(ind, f"{target} = _uuid({t})")
            else:
                w(ind, f"{target}, = {unpack}(buf, pos)")
            w(ind, f"pos += {size}")
            return
        if kind == "struct":
            if nullable:
                w(ind, "if buf[pos] >= 128:")
                w(ind + 1, f"{target} = None")
                w(ind + 1, "pos += 1")
                w(ind, "else:")
                w(ind + 1, f"{target}, pos = read_{f.element_type}(buf, pos + 1, end)")
            else:
                w(ind, f"{target}, pos = read_{f.element_type}(buf, pos, end)")
            return
        k = w.tmp("k")
        if compact and kind == "array" and f.element_type in FIXED_FORMATS and f.element_type != "uuid":
            # Short arrays (count byte 1..64) in one precompiled unpack.
            _packs, unpacks = w.array_consts(FIXED_FORMATS[f.element_type])
            w(ind, f"{k} = buf[pos]")
            w(ind, f"if 0 < {k} <= {ARRAY_STRUCT_LIMIT}:")
            w(ind + 1, f"{target} = list({unpacks}[{k} - 1](buf, pos + 1))")
            w(ind + 1, f"pos += 1 + {FIXED_WIDTHS[f.element_type]} * ({k} - 1)")
            w(ind, "else:")
            ind += 1
        self._read_length(ind, k, compact, "h" if kind == "string" else "i")
        w(ind, f"if {k} < 0:")
        if nullable:
            w(ind + 1, f"if {k} != -1:")
            w(ind + 2, f"raise _bad_length({what!r}, {k})")
            w(ind + 1, f"{target} = None")
        else:
            w(ind + 1, f"raise _bad_length({what!r}, {k})")
        w(ind, "else:")
        self._read_payload(ind + 1, f, target, k, compact, what)

    def _read_tagged(self, name: str, tagged: list[FieldSpec]) -> None:
        w = self.out
        if not tagged:
            w(1, "if buf[pos] == 0:")
            w(2, "pos += 1")
            w(1, "else:")
            w(2, "pos = _read_unknown(buf, pos, end, o.unknown_tagged_fields)")
            return
        w(1, "cnt = buf[pos]")
        w(1, "if cnt < 128:")
        w(2, "pos += 1")
        w(1, "else:")
        w(2, "cnt, pos = _ruv(buf, pos)")
        w(1, "for _ in range(cnt):")
        w(2, "tag, pos = _ruv(buf, pos)")
        w(2, "size, pos = _ruv(buf, pos)")
        w(2, "stop = pos + size")
        w(2, "if stop > end:")
        w(3, f"raise _short({name + ' tagged field'!r}, size, end - pos)")
        keyword = "if"
        for f in tagged:
            what = self.what(name, f)
            w(2, f"{keyword} tag == {f.tag}:")
            self._read_value(3, f, f"o.{f.attr}", True, self.nullable(f), what)
            w(3, "if pos != stop:")
            w(4, f"raise _tag_size({what!r}, size, pos - stop + size)")
            keyword = "elif"
        w(2, "else:")
        w(3, "o.unknown_tagged_fields[tag] = bytes(buf[pos:stop])")
        w(3, "pos = stop")
