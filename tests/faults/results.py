"""The results table: one cell per nemesis × workload, written as JSON and Markdown.

``python tests/faults/results.py A.json [B.json]`` prints the README's table: one run's, or two runs
side by side (ours and Kafka 3.9's, same schedule; run as a file, it needs nothing but the standard
library). Rounds of the same nemesis and workload (a soak
repeats them) are added up; recovery is the median and the worst over those rounds.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Cell:
    round: int
    nemesis: str
    workload: str
    fault: str                       # what the nemesis did, or why it could not
    supported: bool = True
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    unacknowledged_present: int = 0
    failed_writes: int = 0
    consumed: int = 0
    commits: int = 0
    generations: int = 0             # of the workload's group, as the coordinator recorded them
    recovery_s: float | None = None  # nemesis stopped -> cluster healthy
    violations: list[str] = field(default_factory=list)  # every check but loss and duplicates
    examples: list[str] = field(default_factory=list)    # of lost and duplicated writes


@dataclass
class Report:
    broker: str
    schedule: str
    started: str = ""
    minutes: float = 0.0
    load: list[float] = field(default_factory=list)  # 1-minute load average before and after
    cells: list[Cell] = field(default_factory=list)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1))
        path.with_suffix(".md").write_text(self.summary())

    @classmethod
    def read(cls, path: Path) -> Report:
        data = json.loads(path.read_text())
        cells = [Cell(**c) for c in data.pop("cells")]
        return cls(**data, cells=cells)

    @classmethod
    def merge(cls, parts: list[Report]) -> Report:
        """One report of a schedule run in parts (in parallel: minutes are the longest part's)."""
        merged = cls(parts[0].broker, parts[0].schedule, min(p.started for p in parts),
                     max(p.minutes for p in parts), [max(p.load[i] for p in parts if len(p.load) > i) for i in range(2)])
        # Parts take alternate rounds of one schedule: round by round gives the schedule's order back.
        merged.cells = sorted((cell for part in parts for cell in part.cells), key=lambda cell: cell.round)
        return merged

    def violations(self) -> list[str]:
        return [f"round {c.round} {c.nemesis} × {c.workload}: {v}"
                for c in self.cells for v in (*c.examples, *c.violations)]

    def summary(self) -> str:
        lines = [f"Fault schedule '{self.schedule}' against {self.broker}: {len(self.cells)} cells, "
                 f"{self.minutes:.1f} min, load {' -> '.join(f'{x:.1f}' for x in self.load)}", "",
                 table([self])]
        if problems := self.violations():
            lines += ["", "Violations:", *(f"- {p}" for p in problems)]
        return "\n".join(lines) + "\n"


@dataclass
class _Row:
    rounds: int = 0
    supported: bool = True
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    violations: int = 0
    recoveries: list[float] = field(default_factory=list)

    def add(self, cell: Cell) -> None:
        self.rounds += 1
        self.supported = self.supported and cell.supported
        self.acknowledged += cell.acknowledged
        self.lost += cell.lost
        self.duplicated += cell.duplicated
        self.violations += len(cell.violations)
        if cell.recovery_s is not None:
            self.recoveries.append(cell.recovery_s)

    def columns(self, compact: bool) -> list[str]:
        if not self.supported:
            return ["n/a"] * (3 if compact else 5)
        recovery = "-"
        if self.recoveries:
            median, worst = statistics.median(self.recoveries), max(self.recoveries)
            recovery = f"{median:.1f}" if self.rounds == 1 else f"{median:.1f} (max {worst:.1f})"
        counts = [f"{self.acknowledged:,}", str(self.lost), str(self.duplicated)]
        if compact:
            return [" / ".join(counts), str(self.violations), recovery]
        return [*counts, str(self.violations), recovery]


def _rows(report: Report) -> dict[tuple[str, str], _Row]:
    rows: dict[tuple[str, str], _Row] = {}
    for cell in report.cells:
        rows.setdefault((cell.nemesis, cell.workload), _Row()).add(cell)
    return rows


def table(reports: list[Report]) -> str:
    """Markdown: nemesis, workload, rounds, then acknowledged/lost/duplicated/violations/recovery per report."""
    per_report = [_rows(r) for r in reports]
    keys = list(dict.fromkeys(k for rows in per_report for k in rows))
    compact = len(reports) > 1  # side by side: acknowledged / lost / duplicated in one column
    names = ["acknowledged / lost / duplicated", "other violations", "recovery s"] if compact \
        else ["acknowledged", "lost", "duplicated", "other violations", "recovery s"]
    header = ["nemesis", "workload", "rounds"]
    for report in reports:
        header += [f"{report.broker}: {n}" if compact else n for n in names]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for key in keys:
        rounds = max(rows[key].rounds if key in rows else 0 for rows in per_report)
        row = [*key, str(rounds)]
        for rows in per_report:
            row += rows[key].columns(compact) if key in rows else [""] * len(names)
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="results JSON written by a fault run")
    args = parser.parse_args(argv)
    reports = [Report.read(p) for p in args.reports]
    print(table(reports))
    for report in reports:
        print(f"\n{report.broker}: schedule '{report.schedule}', {report.started}, {report.minutes:.1f} min, "
              f"load {' -> '.join(f'{x:.1f}' for x in report.load)}")
        for problem in report.violations():
            print(f"- {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
