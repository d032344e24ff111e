"""Kafka's own Java tools from ``../shared/kafka-cli/`` (Apache Kafka 3.9), run against our brokers.

``kafka_cli()`` (a pytest helper) skips the calling test, saying why, when the tools or a Java
runtime are absent; otherwise it returns a ``KafkaCli`` that runs ``bin/<tool>.sh`` with a
timeout, its logs in the test's own directory (never in ``../shared``), and returns the
completed process for the test to check its output.

Each tool is a JVM start, most of it class loading and JIT warm-up, so tools run with the client
compiler only and a serial GC, and share one class-data archive (CDS) written by the first tool
run of a ``KafkaCli``: together about half the CPU of a default start.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.harness.processes import die_with_parent

KAFKA_CLI = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-cli"
# Replaces kafka-run-class.sh's server-oriented defaults (C2, G1); -Xlog:disable keeps the JVM's
# own warnings (about the class archive, say) out of the tools' output.
TOOL_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true -Xlog:disable"


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
        self.class_archive = self.work_dir / "kafka-tools.jsa"
        self._archive_lock = threading.Lock()
        self._archive_started = False

    def env(self, extra: Mapping[str, str] | None = None, class_archive_option: str = "") -> dict[str, str]:
        env = dict(os.environ)
        env.update({"LOG_DIR": str(self.work_dir / "kafka-cli-logs"), "KAFKA_HEAP_OPTS": self.heap,
                    "KAFKA_JVM_PERFORMANCE_OPTS": f"{TOOL_JVM_OPTS} {class_archive_option}".strip()})
        env.update(extra or {})
        return env

    def _class_archive_option(self, may_write: bool) -> tuple[str, bool]:
        """The JVM option for the class archive, and whether this run writes it: the first run that
        ``may_write`` does, into a temporary file renamed once the JVM has exited (so that no run
        maps a half-written archive); later runs use it."""
        with self._archive_lock:
            if may_write and not self._archive_started:
                self._archive_started = True
                return f"-XX:ArchiveClassesAtExit={self.class_archive}.tmp", True
            if self.class_archive.exists():
                return f"-XX:SharedArchiveFile={self.class_archive}", False
            return "", False

    def tool(self, name: str) -> str:
        return str(KAFKA_CLI / "bin" / f"{name}.sh")

    def run(self, name: str, args: Sequence[str], *, input: str | None = None, timeout: float = 120.0,
            check: bool = True, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``bin/<name>.sh args``; with ``check`` a non-zero exit raises with the tool's output."""
        archive_option, writes_archive = self._class_archive_option(may_write=True)
        try:
            done = subprocess.run([self.tool(name), *args], input=input, capture_output=True, text=True,
                                  timeout=timeout, cwd=self.work_dir, env=self.env(env, archive_option),
                                  preexec_fn=die_with_parent)
        finally:
            if writes_archive and Path(f"{self.class_archive}.tmp").exists():
                with self._archive_lock:
                    os.replace(f"{self.class_archive}.tmp", self.class_archive)
        if check and done.returncode != 0:
            raise KafkaCliError(f"{name} {' '.join(args)} exited with {done.returncode}\n"
                                f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-4000:]}")
        return done

    def popen(self, name: str, args: Sequence[str], *, env: Mapping[str, str] | None = None,
              **kwargs: object) -> subprocess.Popen[str]:
        """Start a long-running tool (a console consumer, a verifiable producer); the caller stops it."""
        return subprocess.Popen([self.tool(name), *args], cwd=self.work_dir, text=True,
                                env=self.env(env, self._class_archive_option(may_write=False)[0]),
                                preexec_fn=die_with_parent, **kwargs)  # type: ignore[call-overload]


def kafka_cli(work_dir: Path | str) -> KafkaCli:
    """The tools for a test, or a skip naming what is missing."""
    import pytest

    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return KafkaCli(work_dir)
