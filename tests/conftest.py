"""Fixtures every test folder may use."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.spark.segment_files import Expected, write_log_dir

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden-logs"


@pytest.fixture
def golden() -> Path:
    """Segment files written by real Kafka brokers (../shared/golden-logs)."""
    if not GOLDEN.is_dir():
        pytest.skip(f"golden logs not found at {GOLDEN} (../shared is absent)")
    return GOLDEN


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Expected]]:
    """A broker log dir written through storage.log.Log (every codec, legacy messages,
    transactions, several segments), and every data record in it."""
    path = tmp_path_factory.mktemp("kafka-logs")
    return path, write_log_dir(str(path))
