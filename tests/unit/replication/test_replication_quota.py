"""Throttled replication: which replicas are throttled and when the quota is used up."""
from __future__ import annotations

import math

from broker.replication.replication_quota import (
    ReplicationQuotaManager,
    ReplicationQuotas,
    throttle_rate,
    throttled_partitions,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_throttled_partitions_are_the_entries_naming_this_broker() -> None:
    assert throttled_partitions("0:1,1:2,2:1", 1) == {0, 2}
    assert throttled_partitions("0:1, 1:2", 2) == {1}
    assert throttled_partitions("*", 7) is None
    assert throttled_partitions("", 1) == set()
    assert throttled_partitions(None, 1) == set()


def test_rates_come_from_the_broker_entity_and_default_to_unbounded() -> None:
    assert throttle_rate({"leader.replication.throttled.rate": "1000"}, "leader.replication.throttled.rate") == 1000
    assert throttle_rate({}, "leader.replication.throttled.rate") == math.inf
    assert throttle_rate({"leader.replication.throttled.rate": "x"}, "leader.replication.throttled.rate") == math.inf


def test_rate_counts_at_least_the_whole_window_but_one() -> None:
    clock = FakeClock()
    quota = ReplicationQuotaManager("test", window_num=11, window_s=1.0, clock=clock)
    quota.update_quota(1000)
    quota.record(5000)
    assert quota.rate() == 500  # 5000 bytes over the minimum 10 s
    assert not quota.is_quota_exceeded()
    quota.record(6000)
    assert quota.rate() == 1100
    assert quota.is_quota_exceeded()
    clock.now += 11  # the window moved past both samples
    assert quota.rate() == 0
    assert not quota.is_quota_exceeded()


def test_unbounded_quota_is_never_exceeded() -> None:
    quota = ReplicationQuotaManager("test", clock=FakeClock())
    quota.record(10**12)
    assert not quota.is_quota_exceeded()


def test_topic_and_broker_configs_feed_both_quotas() -> None:
    quotas = ReplicationQuotas(broker_id=2)
    quotas.on_topic_config("t", {"leader.replication.throttled.replicas": "0:2,1:3",
                                 "follower.replication.throttled.replicas": "*"})
    assert quotas.leader.is_throttled(("t", 0)) and not quotas.leader.is_throttled(("t", 1))
    assert quotas.follower.is_throttled(("t", 5))
    assert not quotas.follower.is_throttled(("other", 0))
    quotas.on_topic_config("t", {})
    assert not quotas.leader.is_throttled(("t", 0)) and not quotas.follower.is_throttled(("t", 5))

    quotas.on_broker_config("<default>", {"follower.replication.throttled.rate": "100"})
    quotas.on_broker_config("2", {"leader.replication.throttled.rate": "50"})
    assert (quotas.leader.bound, quotas.follower.bound) == (50, 100)
    quotas.on_broker_config("2", {})
    assert (quotas.leader.bound, quotas.follower.bound) == (math.inf, 100)


def test_the_quota_windows_are_the_brokers_settings() -> None:
    """replication.quota.window.* for the leader and follower throttles and
    alter.log.dirs.replication.quota.window.* for moves between log dirs, as Kafka reads them."""
    quotas = ReplicationQuotas(broker_id=2, windows=(3, 2.0), alter_log_dirs_windows=(5, 1.0))
    assert (quotas.leader.window_num, quotas.leader.window_s) == (3, 2.0)
    assert (quotas.follower.window_num, quotas.follower.window_s) == (3, 2.0)
    assert (quotas.alter_log_dirs.window_num, quotas.alter_log_dirs.window_s) == (5, 1.0)
    quotas.leader.update_quota(1000)
    quotas.leader.record(5000)  # over 2 windows of 2 s: 1,250 B/s, where the default 10 s would give 500
    assert quotas.leader.is_quota_exceeded()
