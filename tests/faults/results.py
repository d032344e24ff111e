"""The results table: one cell per nemesis × workload, written as JSON and Markdown.

``python tests/faults/results.py A.json [B.json]`` prints the README's table: one run's, or two runs
side by side (ours and Kafka 3.9's, same schedule; run as a file, it needs nothing but the standard
library); ``--chart FILE.png`` also draws each nemesis's recovery time per run (with matplotlib). Rounds of the same nemesis and workload (a soak
repeats them) are added up; recovery is the median and the worst over those rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
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
    machine: str = field(default_factory=lambda: machine())  # where the run was

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1))
        path.with_suffix(".md").write_text(self.summary())

    @classmethod
    def read(cls, path: Path) -> Report:
        data = json.loads(path.read_text())
        cells = [Cell(**c) for c in data.pop("cells")]
        data.setdefault("machine", "machine not recorded")
        return cls(**data, cells=cells)

    @classmethod
    def merge(cls, parts: list[Report]) -> Report:
        """One report of a schedule run in parts (in parallel: minutes are the longest part's)."""
        merged = cls(parts[0].broker, parts[0].schedule, min(p.started for p in parts),
                     max(p.minutes for p in parts), [max(p.load[i] for p in parts if len(p.load) > i) for i in range(2)],
                     machine=parts[0].machine)
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


def machine() -> str:
    """Cores and CPU model of the machine a run is on, for the figures made from its results."""
    model = platform.processor()
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores, {model}"


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


def command(report: Report) -> str:
    """The pytest command that runs the report's schedule against its broker."""
    schedule = "" if report.schedule == "default" else f" --soak {report.minutes:.0f}"
    return "pytest tests/faults" + schedule + ("" if report.broker == "ours" else " --faults-broker kafka")


def chart(reports: list[Report], out: Path) -> None:
    """Median recovery seconds per nemesis, a bar per report, with the commands and machine below."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recoveries = [{} for _ in reports]
    for per_nemesis, report in zip(recoveries, reports, strict=True):
        for cell in report.cells:
            if cell.supported and cell.recovery_s is not None:
                per_nemesis.setdefault(cell.nemesis, []).append(cell.recovery_s)
    nemeses = list(dict.fromkeys(n for per_nemesis in recoveries for n in per_nemesis))
    figure, axis = plt.subplots(figsize=(11, 0.45 * len(nemeses) * len(reports) + 2))
    step = 0.8 / len(reports)
    for k, (report, per_nemesis) in enumerate(zip(reports, recoveries, strict=True)):
        ys = [i + k * step for i, n in enumerate(nemeses) if n in per_nemesis]
        xs = [statistics.median(per_nemesis[n]) for n in nemeses if n in per_nemesis]
        axis.barh(ys, xs, height=step, label=report.broker)
        for y, x in zip(ys, xs, strict=True):
            axis.annotate(f"{x:.1f}", (x, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    axis.set_yticks([i + 0.4 - step / 2 for i in range(len(nemeses))], nemeses, fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("seconds from the end of the fault until the cluster is healthy (median over workloads)")
    axis.margins(x=0.1)
    axis.legend(fontsize=8)
    figure.suptitle(f"fault injection, schedule '{reports[0].schedule}': recovery", fontsize=11)
    footer = "\n".join(f"{command(r)}: {r.machine}, load average {' -> '.join(f'{x:.1f}' for x in r.load)}"
                        for r in reports)
    figure.text(0.01, 0.005, footer, fontsize=7, family="monospace", va="bottom")
    figure.tight_layout(rect=(0, 0.04 + 0.02 * len(reports), 1, 0.97))
    figure.savefig(out, dpi=90)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="results JSON written by a fault run")
    parser.add_argument("--chart", type=Path, metavar="PNG", help="also draw the recovery times")
    args = parser.parse_args(argv)
    reports = [Report.read(p) for p in args.reports]
    if args.chart:
        chart(reports, args.chart)
    print(table(reports))
    for report in reports:
        print(f"\n{report.broker}: schedule '{report.schedule}', {report.started}, {report.minutes:.1f} min, "
              f"load {' -> '.join(f'{x:.1f}' for x in report.load)}")
        for problem in report.violations():
            print(f"- {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
