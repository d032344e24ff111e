"""The Spark integration tests' SparkSession: local[2], one for the package (its modules run on
one xdist worker, tests/conftest.py), so that its JVM starts once and its compiled code is reused
(``log_dir``, the written log dir they read, is in tests/conftest.py)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_jobs.session import create_session


@pytest.fixture(scope="package")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    scratch = tmp_path_factory.mktemp("spark")
    session = create_session(
        "spark-jobs-tests", "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.local.dir": str(scratch / "local"),
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={scratch / 'derby'}",
        },
        progress=False,
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
