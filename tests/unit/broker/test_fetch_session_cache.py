"""Incremental fetch sessions on the leader (FetchSessionCache): partitions of a topic id the
broker does not know yet stay in the session, as Kafka keeps them, until the id resolves."""
from __future__ import annotations

import uuid
from collections import OrderedDict

from broker.fetch_session import CachedPartition, FetchSessionCache

TOPIC_ID = uuid.uuid4()


def _cached(name: str, partition: int, offset: int = 0) -> CachedPartition:
    return CachedPartition(name, partition, TOPIC_ID, offset, 1 << 20)


def test_a_partition_of_an_unknown_topic_id_is_kept_and_resolved_later() -> None:
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, OrderedDict(), [], True, {(TOPIC_ID, 0): _cached("", 0)})
    assert full.session is not None and full.unresolved == [(TOPIC_ID, 0)]
    still_unknown = cache.new_context(full.session.id, 1, OrderedDict(), [], True, topic_name=lambda _: None)
    assert still_unknown.unresolved == [(TOPIC_ID, 0)] and not still_unknown.partitions
    known = cache.new_context(full.session.id, 2, OrderedDict(), [], True, topic_name=lambda _: "t")
    assert known.unresolved == [] and list(known.partitions) == [("t", 0)]
    assert known.partitions[("t", 0)].topic == "t"


def test_forgetting_an_unresolved_partition_by_topic_id() -> None:
    cache = FetchSessionCache()
    full = cache.new_context(0, 0, OrderedDict(), [], True, {(TOPIC_ID, 0): _cached("", 0)})
    assert full.session is not None
    forgot = cache.new_context(full.session.id, 1, OrderedDict(), [], True, forgotten_ids=[(TOPIC_ID, 0)],
                               topic_name=lambda _: "t")
    assert forgot.unresolved == [] and not forgot.partitions
