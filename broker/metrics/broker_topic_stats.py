"""BrokerTopicStats: Kafka's BrokerTopicMetrics meters, per topic and for all topics.

Plain integer counters bumped on the event loop per request partition (never per record: message
counts come from batch headers), read at scrape time. Kafka always keeps these, and so does the
broker, metrics endpoint or not: an increment costs tens of nanoseconds next to microseconds of
append. A topic's counters appear on its first produce or fetch and go when the broker stops
hosting any of its partitions, as Kafka's ``removeMetrics`` does.
"""

from __future__ import annotations


class BrokerTopicMetrics:
    """The Count of each BrokerTopicMetrics meter (MessagesInPerSec, BytesInPerSec, ...)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "bytes_rejected", "failed_produce_requests",
                 "failed_fetch_requests", "total_produce_requests", "total_fetch_requests",
                 "replication_bytes_in", "replication_bytes_out")

    # (attribute, Kafka's meter name); replication bytes are counted for all topics only, as in Kafka.
    METERS: tuple[tuple[str, str], ...] = (
        ("messages_in", "MessagesInPerSec"),
        ("bytes_in", "BytesInPerSec"),
        ("bytes_out", "BytesOutPerSec"),
        ("bytes_rejected", "BytesRejectedPerSec"),
        ("failed_produce_requests", "FailedProduceRequestsPerSec"),
        ("failed_fetch_requests", "FailedFetchRequestsPerSec"),
        ("total_produce_requests", "TotalProduceRequestsPerSec"),
        ("total_fetch_requests", "TotalFetchRequestsPerSec"),
    )
    ALL_TOPICS_ONLY: tuple[tuple[str, str], ...] = (("replication_bytes_in", "ReplicationBytesInPerSec"),
                                                    ("replication_bytes_out", "ReplicationBytesOutPerSec"))

    def __init__(self) -> None:
        for attribute in self.__slots__:
            setattr(self, attribute, 0)


class BrokerTopicStats:
    def __init__(self) -> None:
        self.all_topics = BrokerTopicMetrics()
        self.topics: dict[str, BrokerTopicMetrics] = {}

    def topic(self, topic: str) -> BrokerTopicMetrics:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = BrokerTopicMetrics()
        return stats

    def mark_produce(self, topic: str) -> None:
        """One partition of a produce request (TotalProduceRequestsPerSec counts partitions, as Kafka's)."""
        self.topic(topic).total_produce_requests += 1
        self.all_topics.total_produce_requests += 1

    def mark_failed_produce(self, topic: str) -> None:
        self.topic(topic).failed_produce_requests += 1
        self.all_topics.failed_produce_requests += 1

    def mark_bytes_rejected(self, topic: str, size: int) -> None:
        self.topic(topic).bytes_rejected += size
        self.all_topics.bytes_rejected += size

    def mark_appended(self, topic: str, size: int, messages: int) -> None:
        stats = self.topic(topic)
        stats.bytes_in += size
        stats.messages_in += messages
        all_topics = self.all_topics
        all_topics.bytes_in += size
        all_topics.messages_in += messages

    def mark_fetch(self, topic: str) -> None:
        """One partition of a fetch request (consumer or follower)."""
        self.topic(topic).total_fetch_requests += 1
        self.all_topics.total_fetch_requests += 1

    def mark_failed_fetch(self, topic: str) -> None:
        self.topic(topic).failed_fetch_requests += 1
        self.all_topics.failed_fetch_requests += 1

    def mark_bytes_out(self, topic: str, size: int, from_follower: bool) -> None:
        """Kafka's updateBytesOut: a follower's fetch counts as replication bytes only."""
        if from_follower:
            self.all_topics.replication_bytes_out += size
            return
        self.topic(topic).bytes_out += size
        self.all_topics.bytes_out += size

    def mark_replication_bytes_in(self, size: int) -> None:
        """Bytes a replica fetcher appended (Kafka's updateReplicationBytesIn, all topics only)."""
        self.all_topics.replication_bytes_in += size

    def remove(self, topic: str) -> None:
        self.topics.pop(topic, None)
