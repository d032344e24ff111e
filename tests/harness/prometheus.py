"""Prometheus in tests: scraping a broker's /metrics, and a real Prometheus server (Debian's
``prometheus`` package) scraping real brokers and evaluating the shipped alert rules."""
from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.harness.ports import free_port
from tests.harness.processes import die_with_parent
from tests.harness.waiting import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
ALERT_RULES = REPO_ROOT / "ops" / "prometheus" / "kafka-alerts.yml"
ALERT_RULE_TESTS = REPO_ROOT / "ops" / "prometheus" / "kafka-alerts.test.yml"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int, host: str = "127.0.0.1") -> Samples:
    """Every sample of ``http://host:port/metrics``, by (name, labels)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=15) as answer:
        text = answer.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample with exactly these labels (0 when absent: counters not yet created)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples_by_broker: Sequence[Samples], name: str, **labels: str) -> float:
    return sum(value(samples, name, **labels) for samples in samples_by_broker)


def matching(samples: Samples, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return {key: v for (n, key), v in samples.items() if n == name and wanted <= key}


def promtool() -> str | None:
    return shutil.which("promtool")


class PrometheusServer:
    """A Prometheus scraping ``targets`` every second and evaluating ``rule_files`` every second."""

    def __init__(self, tmp_dir: Path, targets: Sequence[str], rule_files: Sequence[Path] = (ALERT_RULES,),
                 job: str = "kafka") -> None:
        self.dir = tmp_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = self.dir / "prometheus.yml"
        self.config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(targets)}]}],
        }))
        self.log_path = self.dir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("prometheus")
        assert binary is not None, "prometheus is not installed"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        wait_for(self._ready, "Prometheus to be ready", timeout=30, interval=0.2)

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as answer:
            return answer.status == 200

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/{path}?{query}", timeout=10) as answer:
            return json.load(answer)["data"]

    def alerts(self, state: str = "firing") -> list[Mapping[str, Any]]:
        return [a for a in self.api("alerts")["alerts"] if a["state"] == state]

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.alerts()}

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
