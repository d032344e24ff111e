"""ReplicationQuotaManager: bounds the bytes/s of throttled replication (Kafka's KIP-73).

Reassignment copies whole logs; throttling keeps that from starving clients. A partition is
throttled on this broker when the topic's ``leader.replication.throttled.replicas`` (as
leader) or ``follower.replication.throttled.replicas`` (as follower) lists
``<partition>:<this broker>`` or is ``*``; the bound is the broker's dynamic
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``. Only
replicas outside the ISR are held back, so throttling never delays acks=all. Moves between
this broker's log dirs are bounded by ``replica.alter.log.dirs.io.max.bytes.per.second``.

The rate is measured as Kafka's Rate sensor does: bytes in the last ``window_num`` windows of
``window_s`` divided by the elapsed time, which counts as at least ``window_num - 1`` windows.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping

from broker.quota.sampled_rate import SampledRate

from coordination.zk_admin_data import DEFAULT_ENTITY

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ALL_PARTITIONS = None  # the `*` wildcard
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def throttled_partitions(value: str | None, broker_id: int) -> set[int] | None:
    """The partitions a throttled-replicas config value throttles on ``broker_id``; None means all."""
    entries = [e.strip() for e in (value or "").split(",") if e.strip()]
    if entries == ["*"]:
        return ALL_PARTITIONS
    partitions = set()
    for entry in entries:
        partition, _, broker = entry.partition(":")
        if broker.strip() == str(broker_id):
            partitions.add(int(partition))
    return partitions


def throttle_rate(config: Mapping[str, str], key: str) -> float:
    """A rate from a broker entity config; unbounded when absent or invalid (as Kafka's default)."""
    try:
        return float(int(config[key]))
    except (KeyError, ValueError):
        return math.inf


class ReplicationQuotaManager:
    def __init__(self, kind: str, window_num: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kind = kind
        self.window_num = window_num
        self.window_s = window_s
        self.clock = clock
        self.bound = math.inf
        self._throttled: dict[str, set[int] | None] = {}
        self._rate = SampledRate(window_num, window_s)

    def update_quota(self, bytes_per_second: float) -> None:
        if bytes_per_second != self.bound:
            log.info("%s throttle is now %s bytes/s", self.kind, bytes_per_second)
        self.bound = bytes_per_second

    def mark_throttled(self, topic: str, partitions: set[int] | None) -> None:
        before = self._throttled.get(topic, set())
        if partitions == set():
            self._throttled.pop(topic, None)
        else:
            self._throttled[topic] = partitions
        if partitions != before:
            log.info("%s throttled partitions of %s: %s", self.kind, topic,
                     "all" if partitions is ALL_PARTITIONS else sorted(partitions))

    def is_throttled(self, tp: TopicPartition) -> bool:
        if tp[0] not in self._throttled:
            return False
        partitions = self._throttled[tp[0]]
        return partitions is ALL_PARTITIONS or tp[1] in partitions

    def record(self, size: int) -> None:
        self._rate.record(size, self.clock())

    def rate(self) -> float:
        return self._rate.rate(self.clock())

    def is_quota_exceeded(self) -> bool:
        return self.bound != math.inf and self.rate() > self.bound


class ReplicationQuotas:
    """The leader and follower quotas of one broker, fed from topic and broker entity configs."""

    def __init__(self, broker_id: int, windows: tuple[int, float] = (11, 1.0),
                 alter_log_dirs_windows: tuple[int, float] = (11, 1.0)) -> None:
        """``windows``: replication.quota.window.num and .size.seconds; ``alter_log_dirs_windows``:
        alter.log.dirs.replication.quota.window.num and .size.seconds (Kafka's defaults: 11 of 1 s)."""
        self.broker_id = broker_id
        self.leader = ReplicationQuotaManager("LeaderReplication", *windows)
        self.follower = ReplicationQuotaManager("FollowerReplication", *windows)
        self.alter_log_dirs = ReplicationQuotaManager("AlterLogDirsReplication", *alter_log_dirs_windows)
        self._broker_configs: dict[str, Mapping[str, str]] = {}

    def on_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        self.leader.mark_throttled(topic, throttled_partitions(config.get(LEADER_REPLICAS), self.broker_id))
        self.follower.mark_throttled(topic, throttled_partitions(config.get(FOLLOWER_REPLICAS), self.broker_id))

    def on_broker_config(self, entity_name: str, config: Mapping[str, str]) -> None:
        """``entity_name`` is this broker's id or ``<default>``; the broker's own value wins."""
        self._broker_configs[entity_name] = dict(config)
        own = self._broker_configs.get(str(self.broker_id), {})
        default = self._broker_configs.get(DEFAULT_ENTITY, {})
        for key, quota in ((LEADER_RATE, self.leader), (FOLLOWER_RATE, self.follower),
                           (ALTER_LOG_DIRS_RATE, self.alter_log_dirs)):
            quota.update_quota(throttle_rate(own if key in own else default, key))
