"""A real Spark standalone cluster (one master, one or more workers) from the pyspark package, for tests.

pip's pyspark has no sbin/start-*.sh scripts, so the master and the worker are started as
Spark's own daemons do it: ``spark-class org.apache.spark.deploy.master.Master`` and
``...worker.Worker``, on free ports, with their work and log dirs in the test's temp dir.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.harness.ports import free_port
from tests.harness.processes import die_with_parent


# The tests' Spark JVMs (drivers through spark-submit's SPARK_SUBMIT_OPTS, a cluster's daemons): the
# tests read small logs, so the C1 compiler alone and the serial collector cost far less CPU at start-up
# than the default tiered compilation and G1, the same trade as the harness makes for Kafka's tools.
SPARK_TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkClusterError(RuntimeError):
    """The standalone cluster could not be started."""


def spark_bin(name: str) -> Path:
    """A script of the installed pyspark's bin/ (spark-class, spark-submit)."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / name


class SparkStandaloneCluster:
    def __init__(self, directory: Path, cores: int = 2, memory: str = "1g", workers: int = 1) -> None:
        self.dir = directory
        self.cores = cores
        self.memory = memory
        self.workers = workers
        self.port = free_port()
        self.ui_port = free_port()
        self._processes: list[tuple[subprocess.Popen[bytes], Path]] = []

    @property
    def work_dir(self) -> Path:
        """Where the workers run executors: ``app-<id>/<executor id>/`` per application (one worker),
        ``worker-<n>/app-<id>/<executor id>/`` (several)."""
        return self.dir / "work"

    def _worker_dir(self, number: int) -> Path:
        return self.work_dir if self.workers == 1 else self.work_dir / f"worker-{number}"

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(self.dir / "logs"),
                    SPARK_WORKER_DIR=str(self.work_dir), SPARK_NO_DAEMONIZE="1",
                    SPARK_DAEMON_JAVA_OPTS=SPARK_TEST_JVM_OPTS)

    def _daemon(self, name: str, *args: str) -> None:
        log_path = self.dir / f"{name}.log"
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen([str(spark_bin("spark-class")), *args], cwd=self.dir, env=self._env(),
                                       stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        self._processes.append((process, log_path))

    def _alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as answer:
                return int(json.load(answer).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def start(self, timeout: float = 120.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(self.port), "--webui-port", str(self.ui_port))
        for number in range(self.workers):
            self._daemon("worker" if self.workers == 1 else f"worker-{number}",
                         "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                         "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                         "--work-dir", str(self._worker_dir(number)))
        deadline = time.monotonic() + timeout
        while self._alive_workers() < self.workers:
            for process, log_path in self._processes:
                if process.poll() is not None:
                    self.stop()
                    raise SparkClusterError(f"{log_path.name} exited with {process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise SparkClusterError(f"no worker registered within {timeout}s:\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
                         for _process, path in self._processes if path.exists())

    def stop(self) -> None:
        for process, _path in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        self._processes.clear()
