"""Fixtures every test folder may use."""
from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden-logs"


@pytest.fixture
def golden() -> Path:
    """Segment files written by real Kafka brokers (../shared/golden-logs)."""
    if not GOLDEN.is_dir():
        pytest.skip(f"golden logs not found at {GOLDEN} (../shared is absent)")
    return GOLDEN
