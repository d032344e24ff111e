"""The JSON a benchmark writes with ``--json FILE``: its command, the machine, and its rows.

``bench/charts.py`` draws the documentation's charts from these files, so a chart always shows what
a run of the benchmark printed, never numbers typed in by hand.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """The machine a figure was measured on: CPU model, cores, load average, Python."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "load_average": os.getloadavg(),
            "python": sys.version.split()[0], "system": platform.platform()}


def write(path: Path | str, bench: str, unit: str, rows: list[dict[str, Any]], **extra: Any) -> None:
    """``rows``: one dict per table row, with at least ``name`` and ``value`` (in ``unit``)."""
    document = {"bench": bench, "command": shlex.join(["python", *sys.argv]), "unit": unit,
                "machine": machine(), "rows": rows, **extra}
    Path(path).write_text(json.dumps(document, indent=1) + "\n")
