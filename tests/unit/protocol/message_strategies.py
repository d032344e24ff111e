"""Hypothesis strategies for any message at any version, built from its schema."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from protocol.messages import message_class
from protocol.schema import INT_RANGES, ZERO_UUID, FieldSpec, MessageSpec, load_message

_MAX_LIST = 2


def versions_of(name: str) -> list[int]:
    spec = load_message(name)
    return list(range(spec.valid.lo, spec.valid.hi + 1))


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t == "bool":
        return st.booleans()
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.one_of(st.sampled_from(sorted({lo, hi, max(lo, -1), 0})), st.integers(lo, hi))
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "uuid":
        return st.one_of(st.just(ZERO_UUID), st.uuids())
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(t)


@lru_cache(maxsize=None)
def message_strategy(name: str, version: int, unknown_tags: bool = True) -> st.SearchStrategy[Any]:
    """Random ``name`` objects valid at ``version`` (optionally with unknown tagged fields)."""
    return MessageStrategies(name, version, unknown_tags).message()


class MessageStrategies:
    """Random valid objects of one message (and its structs) at one version."""

    def __init__(self, name: str, version: int, unknown_tags: bool = True) -> None:
        self.spec: MessageSpec = load_message(name)
        self.version = version
        self.flexible = version in self.spec.flexible
        self.unknown_tags = unknown_tags
        self.classes = {name: message_class(name)}
        top = self.classes[name]
        for struct_name in self.spec.structs:
            self.classes[struct_name] = getattr(top, struct_name)

    def message(self) -> st.SearchStrategy[Any]:
        return self._struct(self.spec.name, 0)

    def scalar(self, f: FieldSpec) -> st.SearchStrategy[Any]:
        """Values of a non-struct field (or array element); subclasses bias them by field."""
        return _scalar(f.element_type)

    def _fields(self, name: str) -> list[FieldSpec]:
        return self.spec.fields if name == self.spec.name else self.spec.structs[name].fields

    def _struct(self, name: str, depth: int) -> st.SearchStrategy[Any]:
        fields = [f for f in self._fields(name) if self.version in f.versions]
        kwargs = {f.attr: self._field(f, depth) for f in fields}
        if self.flexible and self.unknown_tags:
            known = {f.tag for f in fields if f.tag is not None}
            tags = st.integers(0, 300).filter(lambda t: t not in known)
            kwargs["unknown_tagged_fields"] = st.dictionaries(tags, st.binary(max_size=6), max_size=2)
        return st.builds(self.classes[name], **kwargs)

    def _field(self, f: FieldSpec, depth: int) -> st.SearchStrategy[Any]:
        if f.is_array:
            if f.is_struct:
                element = st.deferred(lambda: self._struct(f.element_type, depth + 1))
            else:
                element = self.scalar(f)
            value = st.lists(element, max_size=_MAX_LIST if depth < 3 else 1)
        elif f.is_struct:
            value = st.deferred(lambda: self._struct(f.type, depth + 1))
        else:
            value = self.scalar(f)
        if self.version in f.nullable:
            value = st.one_of(st.none(), value)
        return value
