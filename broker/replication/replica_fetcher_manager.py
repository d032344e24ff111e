"""ReplicaFetcherManager: which ReplicaFetcher copies which followed partition.

As in Kafka, a broker runs ``num.replica.fetchers`` fetchers per leader broker and spreads
the partitions it follows from that leader over them by a hash of the partition; a fetcher
left without partitions is stopped.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.replication.replica_fetcher import FetcherConfig, ReplicaFetcher, RunBlocking

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replication.replication_quota import ReplicationQuotaManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FetcherKey = tuple[int, tuple[str, int], int]  # leader id, its endpoint, fetcher id


class ReplicaFetcherManager:
    def __init__(self, config: FetcherConfig, num_fetchers: int, run_blocking: RunBlocking,
                 quota: ReplicationQuotaManager | None = None) -> None:
        self.config = config
        self.quota = quota
        self.num_fetchers = max(1, num_fetchers)
        self.run_blocking = run_blocking
        self.fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._owner: dict[TopicPartition, FetcherKey] = {}

    def fetcher_id(self, tp: TopicPartition) -> int:
        return hash(tp) % self.num_fetchers

    async def add_fetcher_for_partitions(self, partitions: dict[TopicPartition, tuple[Partition, tuple[str, int]]]
                                         ) -> None:
        """Follow each partition from its leader at ``endpoint``, starting with truncation."""
        await self.remove_fetcher_for_partitions(list(partitions))
        grouped: dict[FetcherKey, dict[TopicPartition, Partition]] = {}
        for tp, (partition, endpoint) in partitions.items():
            grouped.setdefault((partition.leader_id, endpoint, self.fetcher_id(tp)), {})[tp] = partition
        for key, members in grouped.items():
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                leader_id, endpoint, fetcher_id = key
                fetcher = self.fetchers[key] = ReplicaFetcher(
                    f"ReplicaFetcherThread-{fetcher_id}-{leader_id}", leader_id, endpoint, self.config,
                    self.run_blocking, self.quota)
                fetcher.start()
            async with fetcher.processing:
                fetcher.add_partitions(members)
            for tp in members:
                self._owner[tp] = key
            log.info("Added fetcher to broker %d for partitions %s", key[0], sorted(members))

    async def remove_fetcher_for_partitions(self, tps: list[TopicPartition]) -> None:
        """Stop following; returns once no append for these partitions is in progress."""
        by_fetcher: dict[FetcherKey, list[TopicPartition]] = {}
        for tp in tps:
            key = self._owner.pop(tp, None)
            if key is not None:
                by_fetcher.setdefault(key, []).append(tp)
        for key, members in by_fetcher.items():
            fetcher = self.fetchers[key]
            async with fetcher.processing:
                fetcher.remove_partitions(members)
            if not fetcher.states:
                del self.fetchers[key]
                await fetcher.shutdown()

    def max_lag(self) -> int:
        """Kafka's ReplicaFetcherManager MaxLag: the largest lag of any followed partition."""
        return max((state.lag for fetcher in self.fetchers.values() for state in fetcher.states.values()), default=0)

    def failed_partitions_count(self) -> int:
        """Kafka's FailedPartitionsCount: followed partitions whose last round failed unexpectedly."""
        return sum(state.failed for fetcher in self.fetchers.values() for state in fetcher.states.values())

    def dead_thread_count(self) -> int:
        """Kafka's DeadThreadCount: fetchers whose task ended other than by shutdown."""
        return sum(fetcher.is_dead for fetcher in self.fetchers.values())

    def min_fetch_rate(self) -> float:
        """Kafka's MinFetchRate: the lowest fetch request rate of any fetcher over the last minute
        (0 without fetchers)."""
        now = time.monotonic()
        return min((fetcher.request_rate.rate(now) for fetcher in self.fetchers.values()), default=0.0)

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._owner.clear()
        for fetcher in fetchers:
            await fetcher.shutdown()
