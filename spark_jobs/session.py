"""SparkSession set-up shared by the jobs: local[*] by default, any master on request.

Python workers must import this project's packages (protocol, storage, spark_jobs). In local
mode started from Python they inherit PYTHONPATH from the driver and run the driver's own
interpreter (PYSPARK_PYTHON, unless set), so a virtualenv's pyarrow and codecs are there too;
under spark-submit or on a cluster the packages are zipped and shipped with ``addPyFile``. Spark's console progress bar is the progress display of long runs.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Optional

from pyspark.sql import SparkSession

from spark_jobs.datasource import register

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED_PACKAGES = ("protocol", "storage", "spark_jobs")
DEFAULT_MASTER = "local[*]"


def _export_pythonpath() -> None:
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if REPO_ROOT not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, *parts])


def _package_zip() -> str:
    """A zip of the project packages for cluster executors (a temp file, removed at exit)."""
    handle, path = tempfile.mkstemp(prefix="spark-jobs-", suffix=".zip")
    os.close(handle)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in SHIPPED_PACKAGES:
            for directory, _dirs, files in os.walk(os.path.join(REPO_ROOT, package)):
                for name in files:
                    if name.endswith((".py", ".json")):
                        full = os.path.join(directory, name)
                        archive.write(full, os.path.relpath(full, REPO_ROOT))
    atexit.register(lambda: os.path.exists(path) and os.remove(path))
    return path


def create_session(
    app_name: str,
    master: Optional[str] = None,
    conf: Optional[Mapping[str, str]] = None,
    progress: bool = True,
) -> SparkSession:
    """A session with the kafka-log source registered; ``master`` None keeps spark-submit's choice."""
    # Under spark-submit the JVM (and the environment its Python workers get) already exists.
    jvm_started_elsewhere = "PYSPARK_GATEWAY_PORT" in os.environ
    _export_pythonpath()
    chosen_master = master or (conf or {}).get("spark.master") or DEFAULT_MASTER
    if not jvm_started_elsewhere and chosen_master.startswith("local"):
        # Spark's default worker interpreter is whatever "python3" is on PATH, which need not
        # be the one running this driver (and holding its packages). A cluster's workers keep
        # Spark's default: the driver's path may not exist there.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_ENV_LOADED" not in os.environ and "spark.master" not in (conf or {}):
        builder = builder.master(DEFAULT_MASTER)
    builder = builder.config("spark.sql.session.timeZone", "UTC").config(
        "spark.ui.showConsoleProgress", str(progress).lower()
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if jvm_started_elsewhere or not spark.sparkContext.master.startswith("local"):
        spark.sparkContext.addPyFile(_package_zip())
    register(spark)
    return spark
