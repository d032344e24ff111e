"""The message-definition model: Kafka's JSON schemas as typed Python objects.

The bundled files in ``protocol/schemas/`` (written by ``scripts/import_schemas.py``)
are parsed here once per message; :mod:`protocol.codegen` turns the result into
classes and per-version codecs.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from protocol.exceptions import ProtocolError

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
# Internal-topic records (Kafka's coordinator-key / coordinator-value definitions); not APIs.
RECORD_SCHEMA_DIR = SCHEMA_DIR / "records"

ZERO_UUID = uuid.UUID(int=0)

# Fixed-width primitives and their struct format characters.
FIXED_FORMATS = {
    "bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
    "int64": "q", "float64": "d", "uuid": "16s",
}
INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}
VARIABLE_TYPES = frozenset({"string", "bytes", "records"})


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``lo > hi`` means no version at all ("none")."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str | None, default: Versions | None = None) -> Versions:
        if text is None:
            return default if default is not None else NO_VERSIONS
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


NO_VERSIONS = Versions(0, -1)


def snake_case(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``; Kafka's ``KRaft`` stays one word."""
    name = name.replace("KRaft", "Kraft")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass
class FieldSpec:
    name: str
    attr: str
    type: str  # the JSON type string, e.g. "[]int32", "string", "MetadataResponseTopic"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible: Versions | None  # field-level override (RequestHeader.ClientId: "none")
    ignorable: bool
    default: Any  # JSON default as given (str/bool/int) or None when absent

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type[0].isupper()


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec]


@dataclass
class MessageSpec:
    name: str
    type: str  # request, response, header, data
    api_key: int | None
    valid: Versions
    flexible: Versions
    listeners: frozenset[str]
    latest_version_unstable: bool
    fields: list[FieldSpec]
    structs: dict[str, StructSpec] = field(default_factory=dict)


def _parse_fields(raw: list[dict[str, Any]], structs: dict[str, StructSpec], owner: str) -> list[FieldSpec]:
    fields = []
    for f in raw:
        versions = Versions.parse(f["versions"])
        tagged = Versions.parse(f.get("taggedVersions"))
        if "tag" in f and tagged != versions:
            raise ValueError(f"{owner}.{f['name']}: tagged fields must be tagged in all their versions")
        flexible = Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None
        spec = FieldSpec(
            name=f["name"], attr=snake_case(f["name"]), type=f["type"], versions=versions,
            nullable=Versions.parse(f.get("nullableVersions")), tagged=tagged,
            tag=int(f["tag"]) if "tag" in f else None,
            flexible=flexible, ignorable=bool(f.get("ignorable", False)), default=f.get("default"),
        )
        if "fields" in f:
            name = spec.element_type
            if name in structs:
                raise ValueError(f"{owner}: struct {name} defined twice")
            structs[name] = StructSpec(name, _parse_fields(f["fields"], structs, name))
        fields.append(spec)
    return fields


def parse_message(raw: dict[str, Any]) -> MessageSpec:
    structs: dict[str, StructSpec] = {}
    for common in raw.get("commonStructs", ()):
        structs[common["name"]] = StructSpec(common["name"], [])
    for common in raw.get("commonStructs", ()):
        structs[common["name"]].fields = _parse_fields(common["fields"], structs, common["name"])
    fields = _parse_fields(raw["fields"], structs, raw["name"])
    spec = MessageSpec(
        name=raw["name"], type=raw["type"], api_key=raw.get("apiKey"),
        valid=Versions.parse(raw["validVersions"]), flexible=Versions.parse(raw["flexibleVersions"]),
        listeners=frozenset(raw.get("listeners", ())),
        latest_version_unstable=bool(raw.get("latestVersionUnstable", False)),
        fields=fields, structs=structs,
    )
    _check_references(spec)
    return spec


def _check_references(spec: MessageSpec) -> None:
    for owner in [spec.fields, *(s.fields for s in spec.structs.values())]:
        for f in owner:
            if f.is_struct and f.element_type not in spec.structs:
                raise ValueError(f"{spec.name}.{f.name}: unknown struct type {f.element_type}")
            if not f.is_struct and f.element_type not in FIXED_FORMATS and f.element_type not in VARIABLE_TYPES:
                raise ValueError(f"{spec.name}.{f.name}: unknown type {f.type}")


def schema_names() -> list[str]:
    """Names of every bundled message definition."""
    return sorted(p.stem for p in SCHEMA_DIR.glob("*.json"))


@lru_cache(maxsize=None)
def load_raw(name: str) -> dict[str, Any]:
    for directory in (SCHEMA_DIR, RECORD_SCHEMA_DIR):
        path = directory / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    raise KeyError(f"no message definition named {name!r}")


@lru_cache(maxsize=None)
def load_message(name: str) -> MessageSpec:
    return parse_message(load_raw(name))


def default_value_source(f: FieldSpec) -> str:
    """Python source of the field's default (a fresh value for mutable ones).

    Follows Kafka's generator: numbers default to 0, strings to "", bytes to b"",
    arrays to [], uuids to the zero UUID, records and ``"null"`` defaults to None,
    and numeric defaults may be written in hex.
    """
    d = f.default
    if f.is_array:
        return "None" if d == "null" else "[]"
    t = f.type
    if f.is_struct:
        return "None" if d == "null" else f"{t}()"
    if t == "records":
        return "None"
    if d == "null":
        return "None"
    if t == "bool":
        if d is None:
            return "False"
        if isinstance(d, bool):
            return repr(d)
        if str(d).lower() not in ("true", "false"):
            raise ValueError(f"{f.name}: bad bool default {d!r}")
        return "True" if str(d).lower() == "true" else "False"
    if t in INT_RANGES:
        if d is None or d == "":
            return "0"
        text = str(d).strip()
        value = int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
        lo, hi = INT_RANGES[t]
        if not lo <= value <= hi:
            raise ValueError(f"{f.name}: default {d!r} out of range for {t}")
        return repr(value)
    if t == "float64":
        return repr(float(d)) if d not in (None, "") else "0.0"
    if t == "string":
        return repr(d if d is not None else "")
    if t == "bytes":
        return "b''"
    if t == "uuid":
        if d not in (None, "", "AAAAAAAAAAAAAAAAAAAAAA"):
            raise ValueError(f"{f.name}: unsupported uuid default {d!r}")
        return "ZERO_UUID"
    raise ProtocolError(f"{f.name}: no default for type {t}")
