"""What a consumer group's subscriptions mean in the cluster's current metadata.

Regular expressions use RE2 syntax, as Kafka's coordinator (RE2/J) does, and match whole topic
names; internal topics are never matched. The metadata hash covers the name, id and partition
count of every subscribed topic, so that a topic created, deleted or grown moves the group to a
new epoch and a new target assignment. It is stored in the group's epoch record, so it must be
the same in every process (no Python ``hash``).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING

import re2

from protocol.errors import Errors, KafkaApiError

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


def compile_regex(regex: str) -> re2._Regexp:
    """The compiled expression, or INVALID_REGULAR_EXPRESSION with Kafka's message."""
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as exc:
        message = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise KafkaApiError(Errors.INVALID_REGULAR_EXPRESSION,
                            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {message}.") from None


def resolve_regex(regex: str, metadata_cache: MetadataCache) -> frozenset[str]:
    pattern = compile_regex(regex)
    return frozenset(t for t in metadata_cache.all_topics()
                     if t not in INTERNAL_TOPICS and pattern.fullmatch(t) is not None)


def topic_layout(topics: set[str], metadata_cache: MetadataCache) -> dict[str, tuple[uuid.UUID, int]]:
    """name -> (topic id, partition count) of the topics that exist."""
    layout = {}
    for name in topics:
        partitions = metadata_cache.topic_partitions(name)
        if partitions:
            layout[name] = (metadata_cache.topic_id(name), len(partitions))
    return layout


def metadata_hash(layout: dict[str, tuple[uuid.UUID, int]]) -> int:
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(layout):
        topic_id, count = layout[name]
        digest.update(f"{name}\0{topic_id}\0{count}\n".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)
