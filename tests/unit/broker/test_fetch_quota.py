"""A consumer's fetch under its byte-rate quota, as Kafka 3.9's handleFetchRequest records it."""
from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from broker.quota.client_quota_manager import QuotaManagers


def _request(client_id: str = "reader") -> SimpleNamespace:
    now = time.monotonic_ns()
    return SimpleNamespace(principal=SimpleNamespace(name="ANONYMOUS"), header=SimpleNamespace(client_id=client_id),
                           receive_time_ns=now, dequeue_time_ns=now, handler_time_ns=0)


def test_one_fetch_returns_at_most_what_the_quota_allows_over_all_but_one_window() -> None:
    quotas = QuotaManagers(window_num=3, window_s=1.0)
    assert quotas.fetch_bound(_request()) == math.inf
    quotas.update(None, "reader", {"consumer_byte_rate": "400000"})
    assert quotas.fetch_bound(_request()) == pytest.approx(800_000)  # Kafka's getMaxValueInQuotaWindow
    assert quotas.fetch_bound(_request("other")) == math.inf


def test_a_throttled_fetch_takes_its_bytes_back() -> None:
    quotas = QuotaManagers(window_num=3, window_s=1.0)
    quotas.update(None, "reader", {"consumer_byte_rate": "400000"})
    assert quotas.fetch_throttle_ms(_request(), 700_000) == 0  # 350,000 B/s over the 2 s Kafka assumes
    throttle = quotas.fetch_throttle_ms(_request(), 700_000)
    assert throttle > 0  # answered empty: what it would have carried does not count
    sensor = quotas.fetch._sensors[quotas.fetch.metric_tags("ANONYMOUS", "reader")]
    assert sensor.rate(time.monotonic()) < 400_000
    assert quotas.fetch_throttle_ms(_request(), 50_000) == 0  # a small fetch still fits
