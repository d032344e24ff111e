"""Every console command pyproject.toml declares resolves to a function that exists."""
from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def test_the_documented_commands_are_declared() -> None:
    assert {"pykafka-broker", "pykafka-dump-log", "pykafka-topic-stats", "pykafka-export",
            "pykafka-consumer-offsets", "pykafka-verify-logs"} <= SCRIPTS.keys()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_entry_point_resolves(name: str) -> None:
    module_name, _, attribute = SCRIPTS[name].partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    assert callable(target)
    with pytest.raises(SystemExit) as exit_info:
        target(["--help"])
    assert exit_info.value.code == 0
