"""Shared fixtures of the spark_jobs unit tests (no Spark session: splits are read directly)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.spark.segment_files import Expected, write_log_dir


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Expected]]:
    """A broker log dir written through storage.log.Log, and every data record in it."""
    path = tmp_path_factory.mktemp("kafka-logs")
    return path, write_log_dir(str(path))

