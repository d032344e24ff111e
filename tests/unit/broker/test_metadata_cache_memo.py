"""MetadataCache.memoized: an answer about a topic is rebuilt once an UpdateMetadata carries the
topic or changes the live brokers, and never outlives the topic."""

from __future__ import annotations

import uuid
from types import SimpleNamespace as NS
from typing import Any

from broker.metadata_cache import LEADER_DURING_DELETE, MetadataCache

TOPIC_ID = uuid.uuid4()


def _update(topics: dict[str, int], brokers: tuple[int, ...] = (1,)) -> Any:
    """An UpdateMetadata (the fields MetadataCache reads): ``topics`` maps a name to its leader."""
    return NS(
        controller_id=1,
        live_brokers=[NS(id=b, rack=None, endpoints=[NS(listener="PLAINTEXT", host="h", port=9000 + b)])
                      for b in brokers],
        topic_states=[NS(topic_name=name, topic_id=TOPIC_ID, partition_states=[NS(
            partition_index=0, controller_epoch=1, leader=leader, leader_epoch=0, isr=[1], zk_version=0,
            replicas=[1], offline_replicas=[])]) for name, leader in topics.items()],
    )


def test_an_answer_is_reused_until_its_topic_or_the_brokers_change() -> None:
    cache = MetadataCache(broker_id=1)
    cache.update_metadata(_update({"a": 1, "b": 1}))
    built: list[int] = []

    def answer(variant: str = "v12") -> int:
        return cache.memoized("a", variant, lambda: built.append(cache.partition("a", 0).leader) or len(built))

    assert answer() == 1 and answer() == 1 and built == [1]
    assert answer("v0") == 2  # another variant is built on its own
    cache.update_metadata(_update({"b": 1}))  # another topic: kept
    assert answer() == 1
    cache.update_metadata(_update({"b": 1}, brokers=(1, 2)))  # the brokers changed
    assert answer() == 3
    cache.update_metadata(_update({"a": 2}, brokers=(1, 2)))  # the topic changed
    assert answer() == 4 and built[-1] == 2
    cache.update_metadata(_update({"a": LEADER_DURING_DELETE}, brokers=(1, 2)))
    assert not cache.contains_topic("a") and "a" not in cache.topic_stamps
    cache.update_metadata(_update({"a": 1}, brokers=(1, 2)))  # created again
    assert answer() == 5 and built[-1] == 1


def test_an_answer_about_the_whole_cache_is_rebuilt_after_any_update() -> None:
    cache = MetadataCache(broker_id=1)
    cache.update_metadata(_update({"a": 1}))
    built: list[list[str]] = []

    def answer() -> list[str]:
        return cache.memoized(None, ("PLAINTEXT", 12), lambda: built.append(cache.all_topics()) or built[-1])

    assert answer() == ["a"] and answer() == ["a"] and len(built) == 1
    cache.update_metadata(_update({"b": 1}))
    assert answer() == ["a", "b"] and len(built) == 2
    cache.update_metadata(_update({}))  # nothing but the brokers and the controller: still a new answer
    assert answer() == ["a", "b"] and len(built) == 3
