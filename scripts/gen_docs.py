"""Regenerate the parts of docs/ that are derived from the code, so that they cannot drift.

    python scripts/gen_docs.py           # rewrite the generated sections in place
    python scripts/gen_docs.py --check   # exit 1, naming the files, if any section is out of date

A generated section sits between ``<!-- generated:NAME begin -->`` and ``<!-- generated:NAME end -->``
in a page; the prose around it is written by hand. Sections:

- ``config-served``, ``config-topic``, ``config-no-effect``, ``config-not-kafka`` in
  docs/configuration.md: from broker/config_defs.py, broker/config_defs_unsupported.py,
  broker/admin/dynamic_broker_config.py and broker/admin/topic_configs.py;
- ``bench-<name>`` in docs/benchmarks.md: the table, command and machine of docs/data/bench/<name>.json,
  which ``python bench/<name>.py ... --json`` wrote (bench/charts.py draws its chart from the same file);
- ``faults-default`` in docs/fault-injection.md: the results table of the default fault schedule, ours
  and Kafka 3.9's side by side, from docs/data/faults/{ours,kafka}-default.json (the results JSON a
  run of ``pytest tests/faults`` writes; ``tests/faults/results.py --chart`` draws their chart);
- ``api-matrix`` in docs/compatibility.md: the APIs and versions served (protocol/api_keys.py's
  registry, the handlers registered in broker/handlers/, broker/network/api_version_manager.py)
  against Kafka 3.9, 4.0 and 4.2. The 3.9 and 4.0 ranges come from ../shared/kafka-protocol/API_VERSIONS.md,
  the 4.2 ranges from the message classes of the ``kio`` package (generated from Kafka 4.2's schemas,
  one module per API and version); without either source, from the copy of both kept in
  docs/data/kafka-api-versions.json, which this script rewrites and --check compares.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DOCS = REPO / "docs"
SHARED_API_VERSIONS = REPO.parent / "shared" / "kafka-protocol" / "API_VERSIONS.md"
KAFKA_RANGES = DOCS / "data" / "kafka-api-versions.json"


# --- configuration ---------------------------------------------------------------------------

def _default(value: Any) -> str:
    from broker.config_defs import java_string
    if value is None:
        return "*(none)*"
    text = java_string(value)
    return f"`{text}`" if text != "" else '`""`'


def _config_sections() -> Iterator[tuple[str, list[str]]]:
    """(heading, keys) in the order and under the headings of config_defs.py's definitions."""
    source = (REPO / "broker" / "config_defs.py").read_text().splitlines()
    heading, keys = "", []
    inside = False
    for line in source:
        if line.startswith("_DEFINITIONS"):
            inside = True
            continue
        if not inside:
            continue
        if line.startswith(")"):
            break
        marker = re.match(r"\s*# --- (.*)", line)
        if marker:
            if keys:
                yield heading, keys
            heading, keys = marker.group(1), []
            continue
        key = re.match(r'\s*\("([A-Za-z0-9._-]+)",', line)
        if key:
            keys.append(key.group(1))
    if keys:
        yield heading, keys


def _dynamic(key: str) -> str:
    from broker.admin.dynamic_broker_config import DYNAMIC_CONFIGS, PER_BROKER_CONFIGS
    if key in PER_BROKER_CONFIGS:
        return "per broker"
    return "cluster-wide" if key in DYNAMIC_CONFIGS else ""


def config_served() -> str:
    from broker.config_defs import CONFIG_KEYS, INTERNAL_KEYS, NON_KAFKA_CONFIG_KEYS
    out: list[str] = []
    for heading, keys in _config_sections():
        title = (heading[0].upper() + heading[1:]).replace("<", "&lt;").replace(">", "&gt;")
        out += [f"### {title}", "",
                "| key | type | default | changes at run time |", "| --- | --- | --- | --- |"]
        for key in keys:
            spec = CONFIG_KEYS[key]
            name = f"`{key}`" + (" (internal)" if key in INTERNAL_KEYS else "") \
                + (" (not Kafka's)" if key in NON_KAFKA_CONFIG_KEYS else "")
            out.append(f"| {name} | {spec.type.name.lower()} | {_default(spec.default)} | {_dynamic(key)} |")
        out.append("")
    return "\n".join(out)


def config_topic() -> str:
    from broker.admin.topic_configs import TOPIC_CONFIG_DEFS
    from broker.config_defs import TOPIC_CONFIG_SYNONYMS
    out = ["| topic key | type | default | broker keys that set its default |", "| --- | --- | --- | --- |"]
    for name in sorted(TOPIC_CONFIG_DEFS):
        spec = TOPIC_CONFIG_DEFS[name]
        synonyms = ", ".join(f"`{k}`" for k in TOPIC_CONFIG_SYNONYMS.get(name, ()))
        out.append(f"| `{name}` | {spec.type.name.lower()} | {_default(spec.default)} | {synonyms} |")
    return "\n".join(out) + "\n"


def config_no_effect() -> str:
    from broker.config_defs_unsupported import UNSUPPORTED_CONFIGS
    from broker.config_defs import UNSUPPORTED_KEYS
    out = ["| key | type | Kafka's default |", "| --- | --- | --- |"]
    for name, config_type, default in sorted(UNSUPPORTED_CONFIGS):
        if name in UNSUPPORTED_KEYS:
            out.append(f"| `{name}` | {config_type.lower()} | {_default(default)} |")
    return "\n".join(out) + "\n"


def config_not_kafka() -> str:
    from broker.config_defs import CONFIG_KEYS, NON_KAFKA_CONFIG_KEYS
    out = ["| key | type | default |", "| --- | --- | --- |"]
    for name in sorted(NON_KAFKA_CONFIG_KEYS):
        spec = CONFIG_KEYS[name]
        out.append(f"| `{name}` | {spec.type.name.lower()} | {_default(spec.default)} |")
    return "\n".join(out) + "\n"


# --- API matrix ------------------------------------------------------------------------------

def parse_api_versions(text: str) -> dict[int, dict[str, str]]:
    """The per-API table of API_VERSIONS.md: key -> name, 3.9 range, 4.0.0, 4.0.1 and 4.3 ranges."""
    rows: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 10 or not cells[0].isdigit():
            continue
        v400 = cells[7]
        v401 = v400 if cells[8] == "=" else cells[8]
        v43 = v401 if cells[9] == "=" else cells[9]
        rows[int(cells[0])] = {"name": cells[1], "3.9": cells[2].split(" ")[0], "4.0.0": v400, "4.0.1": v401,
                               "4.3": v43.split(" ")[0], "listeners": cells[5]}
    return rows


def kio_ranges() -> dict[int, str] | None:
    """Kafka 4.2's range of every API: the versions kio has a ``kio/schema/<api>/v<N>/request.py`` for.

    None when kio is not installed."""
    try:
        import kio
    except ImportError:
        return None
    ranges: dict[int, str] = {}
    for api in (Path(kio.__file__).parent / "schema").iterdir():
        versions = sorted(int(path.parent.name[1:]) for path in api.glob("v*/request.py"))
        if not versions:
            continue
        source = (api / f"v{versions[0]}" / "request.py").read_text()
        key = int(re.search(r"__api_key__: ClassVar\[i16\] = i16\((\d+)\)", source).group(1))
        if versions != list(range(versions[0], versions[-1] + 1)):
            raise SystemExit(f"gen_docs: {api.name}'s versions in kio are not contiguous: {versions}")
        ranges[key] = _fmt((versions[0], versions[-1]))
    return ranges


def derived_kafka_ranges() -> dict[int, dict[str, str]] | None:
    """Kafka's ranges from their sources, or None when one of them is missing here."""
    k42 = kio_ranges()
    if k42 is None or not SHARED_API_VERSIONS.exists():
        return None
    rows = parse_api_versions(SHARED_API_VERSIONS.read_text())
    for key, row in rows.items():
        row["4.2"] = k42.get(key, "none")  # kio has every API of Kafka 4.2: the others were removed
    unknown = set(k42) - set(rows)
    if unknown:
        raise SystemExit(f"gen_docs: kio knows API keys that API_VERSIONS.md does not: {sorted(unknown)}")
    return rows


def kafka_ranges() -> dict[int, dict[str, str]]:
    rows = derived_kafka_ranges()
    if rows is not None:
        return rows
    return {int(k): v for k, v in json.loads(KAFKA_RANGES.read_text()).items()}


def kafka_ranges_json() -> str:
    return json.dumps(kafka_ranges(), indent=1, sort_keys=True) + "\n"


def _span(text: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not match:
        return None
    low = int(match.group(1))
    return low, int(match.group(2) or low)


def _fmt(span: tuple[int, int] | None) -> str:
    if span is None:
        return "–"
    return str(span[0]) if span[0] == span[1] else f"{span[0]}-{span[1]}"


def served_ranges() -> dict[int, tuple[int, int]]:
    """What ApiVersions advertises: the broker's own manager over the registered handlers."""
    from broker.handlers import load_all
    from broker.kafka_apis import RegisteredApiVersionManager
    load_all()
    return {int(key): (low, high) for key, low, high in RegisteredApiVersionManager().enabled_apis()}


def _note(key: int, ours: tuple[int, int] | None, kafka: dict[str, str]) -> str:
    k39, k40, k42 = _span(kafka["3.9"]), _span(kafka["4.0.1"]), _span(kafka["4.2"])
    if ours is None:
        if k39 is None:
            return "not in Kafka 3.9"
        if "zkBroker" not in kafka.get("listeners", ""):
            return "not a ZooKeeper-mode broker's API"
        return "not served"
    notes = []
    if k39 is not None and ours != k39:
        notes.append("Kafka 4.x's range" if ours in (k40, k42) else "differs from Kafka 3.9")
    if k40 is None and k42 is None:
        notes.append("ZooKeeper mode only: gone from Kafka 4.x")
    elif k40 is not None and ours[1] < k40[0]:
        notes.append("below what Kafka 4.x clients send")
    return "; ".join(notes)


def api_matrix() -> str:
    from protocol.api_keys import ApiKey
    kafka = kafka_ranges()
    ours = served_ranges()
    out = ["| key | API | served here | Kafka 3.9 | Kafka 4.0 | Kafka 4.2 | note |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for key in sorted(set(kafka) | set(ours)):
        row = kafka[key] if key in kafka else {"name": ApiKey(key).name, "3.9": "–", "4.0.1": "–", "4.2": "–"}
        name = row["name"]
        served = _fmt(ours.get(key)) if key in ours else "no"
        versions = [_fmt(_span(row[v])) if _span(row[v]) else ("–" if row[v] in ("none", "—", "–") else row[v])
                    for v in ("3.9", "4.0.1", "4.2")]
        out.append(f"| {key} | {name} | {served} | {' | '.join(versions)} | {_note(key, ours.get(key), row)} |")
    count = len(ours)
    out += ["", f"{count} APIs served; the ranges are those ApiVersions advertises."]
    return "\n".join(out) + "\n"


# --- benchmark tables ------------------------------------------------------------------------

BENCH_DATA = DOCS / "data" / "bench"


def _number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        return " / ".join(_number(v) for v in value)
    return _number(value)


def _ratio(ours: Any, kafka: Any) -> str:
    if ours is None or kafka is None or isinstance(ours, list) != isinstance(kafka, list):
        return "–"
    if isinstance(ours, list):
        return " / ".join(f"{o / k:.2f}" if k else "–" for o, k in zip(ours, kafka, strict=True))
    return f"{ours / kafka:.2f}" if kafka else "–"


def bench_table(stem: str) -> str:
    """A benchmark's table, its command and machine, and its chart, from the JSON its --json wrote."""
    document = json.loads((BENCH_DATA / f"{stem}.json").read_text())
    machine = document["machine"]
    load = ", ".join(f"{x:.1f}" for x in machine["load_average"])
    kinds: dict[str, str] = document.get("kinds") or {}
    out = [f"`{document['command']}`", "",
           f"Machine: {machine['cores']} cores ({machine['cpu']}), Python {machine['python']}; load average "
           f"{load} (1, 5, 15 min) when the run ended.", ""]
    if kinds:
        ratio = "ours" in kinds and "kafka" in kinds
        out += ["| row | unit | " + " | ".join(kinds.values()) + (" | ours/Kafka |" if ratio else " |"),
                "| --- | --- |" + " --- |" * (len(kinds) + ratio)]
        section = None
        for row in document["rows"]:
            if row.get("section") != section:
                section = row.get("section")
                out.append(f"| **{section}** |" + " |" * (len(kinds) + 1 + ratio))
            arrow = " ↑" if row.get("higher_is_better") else " ↓"
            cells = [_cell(row["value"].get(kind)) for kind in kinds]
            if ratio:
                cells.append(_ratio(row["value"].get("ours"), row["value"].get("kafka")))
            out.append(f"| {row['name']} | {row['unit']}{arrow} | " + " | ".join(cells) + " |")
    else:
        out += ["| row | unit | value |", "| --- | --- | --- |"]
        for row in document["rows"]:
            out.append(f"| {row['name']} | {row.get('unit') or document['unit']} | {_cell(row['value'])} |")
    out += ["", f"![{stem}](img/bench/{stem}.png)"]
    return "\n".join(out) + "\n"


# --- fault injection ---------------------------------------------------------------------------

FAULT_DATA = DOCS / "data" / "faults"


def faults_table() -> str:
    from tests.faults.results import Report, command, table
    reports = [Report.read(FAULT_DATA / f"{broker}-default.json") for broker in ("ours", "kafka")]
    out = []
    for report in reports:
        load = " -> ".join(f"{x:.1f}" for x in report.load)
        out.append(f"- `{command(report)}`: {report.broker}, {len(report.cells)} rounds in {report.minutes:.1f} "
                   f"minutes on {report.machine}; load average {load} (before and after)")
    out += ["", table(reports), "", "![recovery per nemesis](img/faults/default.png)"]
    return "\n".join(out) + "\n"


# --- sections in pages -----------------------------------------------------------------------

SECTIONS: dict[str, tuple[Path, Callable[[], str]]] = {
    "config-served": (DOCS / "configuration.md", config_served),
    "config-topic": (DOCS / "configuration.md", config_topic),
    "config-no-effect": (DOCS / "configuration.md", config_no_effect),
    "config-not-kafka": (DOCS / "configuration.md", config_not_kafka),
    "api-matrix": (DOCS / "compatibility.md", api_matrix),
    "faults-default": (DOCS / "fault-injection.md", faults_table),
    **{f"bench-{path.stem}": (DOCS / "benchmarks.md", lambda stem=path.stem: bench_table(stem))
       for path in sorted(BENCH_DATA.glob("*.json"))},
}


def replace_section(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- generated:{re.escape(name)} begin[^>]*-->\n).*?(<!-- generated:{re.escape(name)} end -->)",
                         re.S)
    if not pattern.search(text):
        raise SystemExit(f"gen_docs: no section {name!r} in the page")
    return pattern.sub(lambda m: m.group(1) + "\n" + body + "\n" + m.group(2), text, count=1)


def rendered() -> dict[Path, str]:
    """Every page with generated sections, as it should read, and the copy of Kafka's ranges."""
    pages: dict[Path, str] = {KAFKA_RANGES: kafka_ranges_json()}
    for name, (path, render) in SECTIONS.items():
        text = pages.get(path) or path.read_text()
        pages[path] = replace_section(text, name, render())
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the committed pages are current")
    args = parser.parse_args(argv)
    pages = rendered()
    stale = [path for path, text in pages.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is out of date: run python scripts/gen_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(pages[path])
    for path in stale:
        print(f"rewrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
