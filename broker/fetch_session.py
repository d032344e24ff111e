"""Incremental fetch sessions (KIP-227, Kafka's FetchManager and FetchSessionCache).

A client opens a session with a full fetch at epoch 0, then sends only changed partitions
at increasing epochs; the broker remembers the rest and answers an incremental fetch with
only the partitions that have something new (records, an error, a moved high watermark,
last stable offset or log start offset). Epoch -1 closes the session (sessionless fetch).

A partition fetched by a topic id this broker does not know yet (its metadata has not arrived) is
answered UNKNOWN_TOPIC_ID but kept in the session, as Kafka keeps it, and resolved once the id is
known: a follower that sent it in the full fetch never sends it again while it stays unchanged.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import Errors
from protocol.schema import ZERO_UUID

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0

TopicPartition = tuple[str, int]
IdPartition = tuple[uuid.UUID, int]  # a partition of a topic id not known (yet) by name


@dataclass(slots=True)
class CachedPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1
    # What the client was last told, to know whether an incremental response must include it.
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1

    def update_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.log_start_offset = other.log_start_offset
        self.last_fetched_epoch = other.last_fetched_epoch
        if other.topic_id != ZERO_UUID:
            self.topic_id = other.topic_id

    def must_respond(self, error: int, has_records: bool, high_watermark: int, last_stable_offset: int,
                     log_start_offset: int, remember: bool = True) -> bool:
        """True when an incremental response has to carry this partition; with ``remember``, what
        is sent is recorded (not for a response that may still be replaced, see ``remove``)."""
        changed = (high_watermark, last_stable_offset, log_start_offset) != (
            self.high_watermark, self.last_stable_offset, self.local_log_start_offset)
        if error == 0 and remember:
            self.high_watermark = high_watermark
            self.last_stable_offset = last_stable_offset
            self.local_log_start_offset = log_start_offset
        return bool(error) or has_records or changed


class FetchSession:
    def __init__(self, session_id: int, uses_topic_ids: bool, partitions: OrderedDict[TopicPartition, CachedPartition],
                 unresolved: dict[IdPartition, CachedPartition]):
        self.id = session_id
        self.epoch = 1  # the next epoch the client must send
        self.uses_topic_ids = uses_topic_ids
        self.partitions = partitions
        self.unresolved = unresolved

    def resolve(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        """Move the partitions whose topic id is known by now among the others."""
        for key, cached in list(self.unresolved.items()):
            name = topic_name(key[0])
            if name is not None:
                del self.unresolved[key]
                cached.topic = name
                self.partitions[(name, key[1])] = cached


@dataclass
class FetchContext:
    """What one fetch request reads and how its response is filtered."""

    partitions: OrderedDict[TopicPartition, CachedPartition]
    session: FetchSession | None = None
    incremental: bool = False
    error: Errors = Errors.NONE
    unresolved: list[IdPartition] = field(default_factory=list)  # answered UNKNOWN_TOPIC_ID

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000) -> None:
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def __len__(self) -> int:
        return len(self._sessions)

    def remove(self, session_id: int) -> None:
        """Drop a session a throttled fetch just created: Kafka creates one only with the first
        response that carries data, so the client opens it again with its next full fetch."""
        self._sessions.pop(session_id, None)

    def new_context(self, session_id: int, epoch: int, fetch_data: OrderedDict[TopicPartition, CachedPartition],
                    forgotten: list[TopicPartition], uses_topic_ids: bool,
                    unresolved: dict[IdPartition, CachedPartition] | None = None,
                    forgotten_ids: list[IdPartition] | None = None,
                    topic_name: Callable[[uuid.UUID], str | None] | None = None) -> FetchContext:
        unresolved = unresolved or {}
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            session = self._create(uses_topic_ids, fetch_data, unresolved) if epoch == INITIAL_EPOCH else None
            return FetchContext(fetch_data, session, unresolved=list(unresolved))
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(OrderedDict(), error=Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(OrderedDict(), error=Errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(OrderedDict(), error=Errors.FETCH_SESSION_TOPIC_ID_ERROR)
        for tp, cached in fetch_data.items():
            existing = session.partitions.get(tp)
            if existing is None:
                session.partitions[tp] = cached
            else:
                existing.update_request(cached)
        session.unresolved.update(unresolved)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for key in forgotten_ids or ():
            session.unresolved.pop(key, None)
        if topic_name is not None:
            session.resolve(topic_name)
        session.epoch = 1 if session.epoch == 0x7FFFFFFF else session.epoch + 1
        self._sessions.move_to_end(session.id)
        return FetchContext(session.partitions, session, incremental=True, unresolved=list(session.unresolved))

    def _create(self, uses_topic_ids: bool, partitions: OrderedDict[TopicPartition, CachedPartition],
                unresolved: dict[IdPartition, CachedPartition]) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._sessions.popitem(last=False)  # evict the least recently used session
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, uses_topic_ids, partitions, dict(unresolved))
        self._sessions[session_id] = session
        return session
