#!/usr/bin/env python3
"""Import Kafka's message definitions into ``protocol/schemas/``.

Kafka's JSON files carry ``//`` comments and long ``about`` prose. The codec only
needs the wire-relevant keys, so this writes one compact JSON file per message
(same name as Kafka's) keeping just those keys. The bundled files make the
project independent of ``../shared``; re-run this after updating the source.

The definitions taken from a newer Kafka (``protocol.schema_sources.NEWER_THAN_3_9``) are left
alone here; the share-group ones come from ``scripts/kafka42_share_schemas.py``.

Usage: python scripts/import_schemas.py [SOURCE_DIR] [DEST_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from protocol.schema_sources import NEWER_THAN_3_9  # noqa: E402  (the repo root is on the path now)
DEFAULT_SOURCE = ROOT.parent / "shared" / "kafka-protocol" / "messages"
DEFAULT_DEST = ROOT / "protocol" / "schemas"

MESSAGE_KEYS = (
    "apiKey", "type", "name", "validVersions", "flexibleVersions", "deprecatedVersions",
    "latestVersionUnstable", "listeners", "fields", "commonStructs",
)
STRUCT_KEYS = ("name", "versions", "fields")
FIELD_KEYS = (
    "name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
    "flexibleVersions", "ignorable", "mapKey", "zeroCopy", "fields",
)


def strip_comments(text: str) -> str:
    """Remove ``//`` comments outside string literals (Kafka's JSON dialect)."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            in_string = c != '"'
            out.append(c)
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_kafka_json(path: Path) -> dict[str, Any]:
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


def _compact_fields(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = []
    for field in fields:
        kept = {k: field[k] for k in FIELD_KEYS if k in field}
        if "fields" in kept:
            kept["fields"] = _compact_fields(kept["fields"])
        result.append(kept)
    return result


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The wire-relevant subset of one Kafka message definition."""
    kept = {k: schema[k] for k in MESSAGE_KEYS if k in schema}
    kept["fields"] = _compact_fields(kept.get("fields", []))
    if "commonStructs" in kept:
        kept["commonStructs"] = [
            {**{k: s[k] for k in STRUCT_KEYS if k in s}, "fields": _compact_fields(s["fields"])}
            for s in kept["commonStructs"]
        ]
    return kept


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_SOURCE
    dest = Path(argv[2]) if len(argv) > 2 else DEFAULT_DEST
    files = sorted(source.glob("*.json"))
    if not files:
        print(f"no *.json message definitions in {source}", file=sys.stderr)
        return 1
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.glob("*.json"):
        if stale.stem not in NEWER_THAN_3_9:
            stale.unlink()
    files = [path for path in files if path.stem not in NEWER_THAN_3_9]
    for path in files:
        schema = compact_schema(load_kafka_json(path))
        if schema["name"] != path.stem:
            raise SystemExit(f"{path}: name {schema['name']!r} does not match the file name")
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
        (dest / path.name).write_text(text + "\n", encoding="utf-8")
    print(f"wrote {len(files)} schemas to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
