"""Charts for the documentation, drawn from the JSON the benchmarks write with ``--json``.

    python bench/charts.py docs/data/bench/*.json --out docs/img/bench

One PNG per JSON file (same stem): horizontal bars, one panel per unit; a row measured for several
broker kinds (bench/vs_kafka.py) gets one bar per kind, and a row of percentiles one bar per
percentile. The chart's footer names the command and the machine, as the JSON records them.
"""

from __future__ import annotations

import argparse
import json
import textwrap
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PERCENTILES = {2: ("p50", "p99"), 3: ("p50", "p99", "p99.9")}


def _bars(document: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, float]]]]:
    """unit -> [(bar label, {kind: value})], in the rows' order."""
    panels: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for row in document["rows"]:
        unit = row.get("unit") or document.get("unit", "")
        values = row["value"] if isinstance(row["value"], dict) else {"": row["value"]}
        width = max((len(v) for v in values.values() if isinstance(v, list)), default=0)
        if width:
            names = PERCENTILES.get(width, tuple(str(i) for i in range(width)))
            for i, percentile in enumerate(names):
                panels.setdefault(unit, []).append((f"{row['name']} {percentile}",
                                                    {k: v[i] for k, v in values.items() if v is not None}))
        else:
            panels.setdefault(unit, []).append((row["name"], {k: v for k, v in values.items() if v is not None}))
    return panels


def footer(document: dict[str, Any]) -> str:
    machine = document["machine"]
    load = ", ".join(f"{x:.1f}" for x in machine["load_average"])
    command = textwrap.fill(document["command"], 150, subsequent_indent="    ")
    return (f"{command}\n{machine['cores']} cores, {machine['cpu']}, Python {machine['python']}, "
            f"load average {load} at the end")


def draw(document: dict[str, Any], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _bars(document)
    kinds = document.get("kinds") or {"": ""}
    heights = [max(1.6, 0.32 * len(bars) * max(1, len(kinds))) for bars in panels.values()]
    figure, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights) + 1.2),
                                gridspec_kw={"height_ratios": heights}, squeeze=False)
    for axis, (unit, bars) in zip(axes[:, 0], panels.items(), strict=True):
        step = 0.8 / len(kinds)
        for k, (kind, label) in enumerate(kinds.items()):
            # a row a kind has no value for (not measured for it) gets neither a bar nor a label
            measured = [(i + k * step, values[kind]) for i, (_, values) in enumerate(bars) if kind in values]
            if not measured:
                continue
            ys, xs = [y for y, _ in measured], [x for _, x in measured]
            axis.barh(ys, xs, height=step, label=label or None, color=f"C{k}")  # a kind's colour in every panel
            for y, x in measured:
                axis.annotate(f"{x:,.3g}" if x < 1000 else f"{x:,.0f}", (x, y), xytext=(3, 0),
                              textcoords="offset points", va="center", fontsize=7)
        axis.set_yticks([i + 0.4 - step / 2 for i in range(len(bars))], [name for name, _ in bars], fontsize=8)
        axis.invert_yaxis()
        axis.set_xlabel(unit)
        axis.margins(x=0.12)
        if any(kinds.values()):
            axis.legend(fontsize=8, loc="best")
    figure.suptitle(document["bench"], fontsize=11)
    figure.text(0.01, 0.005, footer(document), fontsize=7, family="monospace", va="bottom")
    figure.tight_layout(rect=(0, 0.05, 1, 0.97))
    figure.savefig(out, dpi=90)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="JSON written by a benchmark's --json")
    parser.add_argument("--out", type=Path, required=True, help="directory for the PNGs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.files:
        target = args.out / f"{path.stem}.png"
        draw(json.loads(path.read_text()), target)
        print(f"{path} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
