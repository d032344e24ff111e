"""SampledRate, the rate behind every quota, against Kafka's Rate over a SampledStat."""
from __future__ import annotations

import pytest

from broker.quota.sampled_rate import SampledRate


def test_the_window_is_the_elapsed_time_plus_the_full_windows_it_lacks() -> None:
    """Kafka's Rate.windowSize: 2.5 s after the first sample, with 11 windows of 1 s, the rate is
    measured over 2.5 + (10 - 2) = 10.5 s (not max(2.5, 10) = 10)."""
    rate = SampledRate(11, 1.0)
    rate.record(105.0, now=100.0)
    assert rate.window_size(102.5) == pytest.approx(10.5)
    assert rate.rate(102.5) == pytest.approx(10.0)


def test_past_all_but_one_full_window_the_window_is_the_elapsed_time() -> None:
    rate = SampledRate(3, 2.0)
    for t in (0.0, 2.0, 4.5):
        rate.record(1.0, now=t)
    assert rate.window_size(5.0) == pytest.approx(5.0)
    assert rate.rate(5.0) == pytest.approx(3 / 5.0)


def test_samples_older_than_all_windows_are_dropped() -> None:
    rate = SampledRate(2, 1.0)
    rate.record(50.0, now=0.0)
    rate.record(4.0, now=1.5)
    # the first sample is 2.2 s old: gone; the second started 0.7 s ago, one full window short
    assert rate.rate(2.2) == pytest.approx(4.0 / 1.7)
    assert rate.rate(10.0) == 0.0



def test_the_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    """Kafka's QuotaUtils.throttleTime: (rate - bound) / bound * window size."""
    rate = SampledRate(11, 1.0)
    rate.record(2000.0, now=0.0)  # 200/s over the 10 s window
    assert rate.throttle_s(100.0, now=0.0) == pytest.approx(10.0)  # 20 s in all for 2,000 at 100/s
    assert rate.throttle_s(200.0, now=0.0) == 0.0
    assert rate.throttle_s(0.0, now=0.0) == float("inf")
