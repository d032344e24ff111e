"""The jobs as `spark-submit spark_jobs/<job>.py ...`: in local mode and on a standalone cluster.

Under spark-submit the JVM exists before the job's Python starts, and on a cluster the
executors are other processes that did not start from this repository: the job must ship its
packages itself. PYSPARK_PYTHON names the interpreter with the dependencies, as a user with a
virtualenv sets it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_jobs.session import REPO_ROOT
from tests.harness.spark_cluster import SparkStandaloneCluster, spark_bin
from tests.unit.spark.segment_files import Expected

SUBMIT_TIMEOUT_S = 300
CLUSTER_START_S = 120  # the master up and a worker registered
FIXTURES_S = 100  # the log dir written, the cluster stopped

pytestmark = [pytest.mark.integration, pytest.mark.timeout(FIXTURES_S + SUBMIT_TIMEOUT_S)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SparkStandaloneCluster]:
    spark_cluster = SparkStandaloneCluster(tmp_path / "spark-cluster")
    spark_cluster.start(timeout=CLUSTER_START_S)
    try:
        yield spark_cluster
    finally:
        spark_cluster.stop()


def _submit(job: str, args: list[str], cwd: Path, master: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)  # nothing may depend on the caller's import path
    command = [str(spark_bin("spark-submit")), *(master or []), "--conf", "spark.ui.enabled=false",
               os.path.join(REPO_ROOT, "spark_jobs", f"{job}.py"), *args, "--no-progress"]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S)
    assert done.returncode == 0, f"{command} exited with {done.returncode}:\n{done.stderr[-4000:]}"
    return done


def _exported_rows(out: Path) -> list[tuple]:
    table = pq.read_table(str(out), partitioning="hive")
    return sorted(zip(*(table.column(c).to_pylist() for c in ("topic", "partition", "offset", "key", "value"))))


def _expected_rows(expected: list[Expected], topics: set[str]) -> list[tuple]:
    return sorted((e.topic, e.partition, e.offset, e.key, e.value) for e in expected if e.topic in topics)


def test_export_with_spark_submit_in_local_mode(log_dir: tuple[Path, list[Expected]], tmp_path: Path) -> None:
    path, expected = log_dir
    out = tmp_path / "export"
    _submit("export", ["--log-dirs", str(path), "--output", str(out), "--topics", "events", "legacy"], tmp_path)
    assert _exported_rows(out) == _expected_rows(expected, {"events", "legacy"})


@pytest.mark.timeout(FIXTURES_S + CLUSTER_START_S + 2 * SUBMIT_TIMEOUT_S)
def test_jobs_on_a_standalone_cluster(cluster: SparkStandaloneCluster, log_dir: tuple[Path, list[Expected]],
                                      tmp_path: Path) -> None:
    path, expected = log_dir
    master = ["--master", cluster.master_url, "--executor-memory", "512m"]
    out = tmp_path / "export"
    _submit("export", ["--log-dirs", str(path), "--output", str(out)], tmp_path, master)
    assert _exported_rows(out) == _expected_rows(expected, {e.topic for e in expected})
    checked = _submit("verify", ["--log-dirs", str(path)], tmp_path, master)
    assert "0 problems" in checked.stdout, checked.stdout[-2000:]
    # both ran on the worker's executors: one application directory each, with an executor's logs
    assert len(list(cluster.work_dir.glob("app-*/*/stderr"))) == 2
