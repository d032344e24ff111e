"""The one table of bench/vs_kafka.py: rows, the values each broker kind got per repeat, medians.

A row's value is one number or a tuple of numbers (latency percentiles); medians and the
ours/Kafka ratio are taken component by component. A kind that cannot run a row gets "n/a" with a
numbered reason under the table; a row that raised gets "failed" the same way.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

Value = float | tuple[float, ...]


@dataclass(frozen=True)
class Row:
    section: str
    name: str
    unit: str            # e.g. "msg/s", "ms p50/p99/p99.9", "MB", "s"
    higher_is_better: bool


class Results:
    def __init__(self, kinds: Sequence[str], labels: dict[str, str]) -> None:
        self.kinds = list(kinds)
        self.labels = labels
        self.rows: list[Row] = []
        self.values: dict[tuple[Row, str], list[Value]] = {}
        self.missing: dict[tuple[Row, str], str] = {}   # "n/a: reason" or "failed: reason"
        self.notes: list[str] = []                       # failures outside any row
        self.conditions: list[str] = []                  # e.g. the load average around each kind

    def _declare(self, row: Row) -> None:
        if row not in self.rows:
            self.rows.append(row)

    def add(self, row: Row, kind: str, value: Value) -> None:
        self._declare(row)
        self.values.setdefault((row, kind), []).append(value)
        print(f"  {self.labels[kind]:<10} {row.section}: {row.name}: {_format(value)} {row.unit}", flush=True)

    def not_available(self, row: Row, kind: str, reason: str) -> None:
        self._declare(row)
        self.missing.setdefault((row, kind), f"n/a: {reason}")

    def failed(self, row: Row, kind: str, reason: str) -> None:
        self._declare(row)
        if (row, kind) not in self.values:
            self.missing.setdefault((row, kind), f"failed: {reason}")

    def has_failed(self, row: Row, kind: str) -> bool:
        return self.missing.get((row, kind), "").startswith("failed")

    def median(self, row: Row, kind: str) -> Value | None:
        values = self.values.get((row, kind))
        if not values:
            return None
        if isinstance(values[0], tuple):
            return tuple(statistics.median(v[i] for v in values if isinstance(v, tuple))
                         for i in range(len(values[0])))
        return statistics.median(v for v in values if not isinstance(v, tuple))

    def render(self) -> str:
        """A Markdown table: row | unit | <kind>... with ours/Kafka after Kafka, reasons below."""
        notes: list[str] = []
        columns = ["row", "unit"]
        for kind in self.kinds:
            columns.append(self.labels[kind])
            if kind == "kafka" and "ours" in self.kinds:
                columns.append("ours/Kafka")
        lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
        sections = list(dict.fromkeys(row.section for row in self.rows))
        section = None
        for row in sorted(self.rows, key=lambda r: sections.index(r.section)):
            if row.section != section:
                section = row.section
                lines.append(f"| **{section}** |" + " |" * (len(columns) - 1))
            cells = [row.name, row.unit + (" ↑" if row.higher_is_better else " ↓")]
            for kind in self.kinds:
                cells.append(self._cell(row, kind, notes))
                if kind == "kafka" and "ours" in self.kinds:
                    cells.append(_ratio(self.median(row, "ours"), self.median(row, "kafka")))
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "↑ higher is better, ↓ lower is better; medians over the repeats. "
                  + "; ".join(self.conditions) + " (1, 5, 15 min)."]
        lines += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
        lines += [f"failed: {note}" + (f" ({n} times)" if n > 1 else "") for note, n in Counter(self.notes).items()]
        return "\n".join(lines)

    def rows_json(self) -> list[dict[str, object]]:
        """The table for ``--json``: per row its section, unit and each kind's median (None: none)."""
        return [{"section": row.section, "name": row.name, "unit": row.unit, "higher_is_better": row.higher_is_better,
                 "value": {kind: self.median(row, kind) for kind in self.kinds}} for row in self.rows]

    def labels_json(self) -> dict[str, str]:
        return {kind: self.labels[kind] for kind in self.kinds}

    def _cell(self, row: Row, kind: str, notes: list[str]) -> str:
        value = self.median(row, kind)
        if value is not None:
            return _format(value)
        note = self.missing.get((row, kind))
        if note is None:
            return "–"
        text = f"{self.labels[kind]}: {note}"
        if text not in notes:
            notes.append(text)
        return f"{note.split(':')[0]} [{notes.index(text) + 1}]"


def _format(value: Value) -> str:
    if isinstance(value, tuple):
        return " / ".join(_number(v) for v in value)
    return _number(value)


def _number(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _ratio(ours: Value | None, kafka: Value | None) -> str:
    if ours is None or kafka is None:
        return "–"
    if isinstance(ours, tuple) and isinstance(kafka, tuple):
        return " / ".join(f"{o / k:.2f}" if k else "–" for o, k in zip(ours, kafka, strict=True))
    if isinstance(ours, tuple) or isinstance(kafka, tuple):
        return "–"
    return f"{ours / kafka:.2f}" if kafka else "–"
