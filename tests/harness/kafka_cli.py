"""Kafka's own Java tools from ``../shared/kafka-cli/`` (Apache Kafka 3.9), run against our brokers.

``kafka_cli()`` (a pytest helper) skips the calling test, saying why, when the tools or a Java
runtime are absent; otherwise it returns a ``KafkaCli`` that runs ``bin/<tool>.sh`` with a
timeout, its logs in the test's own directory (never in ``../shared``), and returns the
completed process for the test to check its output.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.harness.processes import die_with_parent

KAFKA_CLI = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-cli"


def kafka_cli_unavailable_reason() -> str | None:
    """Why Kafka's Java tools cannot run here, or None when they can."""
    if not (KAFKA_CLI / "bin" / "kafka-run-class.sh").is_file():
        return f"Kafka's Java tools not found at {KAFKA_CLI} (../shared is absent)"
    if shutil.which("java") is None:
        return "no Java runtime on PATH (Debian: apt-get install openjdk-17-jre-headless)"
    return None


class KafkaCliError(AssertionError):
    """A tool exited non-zero where the test needed it to succeed; carries its output."""


class KafkaCli:
    def __init__(self, work_dir: Path | str, heap: str = "-Xmx256m") -> None:
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.heap = heap

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"LOG_DIR": str(self.work_dir / "kafka-cli-logs"), "KAFKA_HEAP_OPTS": self.heap})
        env.update(extra or {})
        return env

    def tool(self, name: str) -> str:
        return str(KAFKA_CLI / "bin" / f"{name}.sh")

    def run(self, name: str, args: Sequence[str], *, input: str | None = None, timeout: float = 120.0,
            check: bool = True, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``bin/<name>.sh args``; with ``check`` a non-zero exit raises with the tool's output."""
        done = subprocess.run([self.tool(name), *args], input=input, capture_output=True, text=True,
                              timeout=timeout, cwd=self.work_dir, env=self.env(env), preexec_fn=die_with_parent)
        if check and done.returncode != 0:
            raise KafkaCliError(f"{name} {' '.join(args)} exited with {done.returncode}\n"
                                f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-4000:]}")
        return done

    def popen(self, name: str, args: Sequence[str], *, env: Mapping[str, str] | None = None,
              **kwargs: object) -> subprocess.Popen[str]:
        """Start a long-running tool (a console consumer, a verifiable producer); the caller stops it."""
        return subprocess.Popen([self.tool(name), *args], cwd=self.work_dir, env=self.env(env), text=True,
                                preexec_fn=die_with_parent, **kwargs)  # type: ignore[call-overload]


def kafka_cli(work_dir: Path | str) -> KafkaCli:
    """The tools for a test, or a skip naming what is missing."""
    import pytest

    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return KafkaCli(work_dir)
