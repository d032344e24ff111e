"""Share sessions (Kafka's ShareSession and ShareSessionCache, KIP-932).

A share consumer opens a session with epoch 0 listing the partitions it fetches, then sends only
changes (new partitions, ``ForgottenTopicsData``) at increasing epochs; epoch -1 closes it. The
session is keyed by (group id, member id). A request at the wrong epoch is
INVALID_SHARE_SESSION_EPOCH, one for a session the broker does not have SHARE_SESSION_NOT_FOUND;
neither changes the session. The cache holds at most ``max_entries`` sessions: when full, the
least recently used one idle for longer than ``eviction_ms`` makes room, else a new session is
SHARE_SESSION_LIMIT_REACHED.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import Errors

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

# (topic, partition) of a session; the topic id travels with it for the response
SessionPartition = tuple[str, int]
SessionKey = tuple[str, str]  # (group id, member id)


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: wraps to 1, never back to the initial 0."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: dict[SessionPartition, object] = field(default_factory=dict)  # -> topic id
    last_used_ms: int = 0


@dataclass
class SessionResult:
    error: Errors = Errors.NONE
    session: ShareSession | None = None
    closed: bool = False  # the request closed the session (epoch -1)


class ShareSessionCache:
    def __init__(self, max_entries: int = 2000, eviction_ms: int = 120_000) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[SessionKey, ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def new_context(self, group_id: str, member_id: str, epoch: int, added: Iterable[tuple[SessionPartition, object]],
                    forgotten: Iterable[SessionPartition], now_ms: int) -> SessionResult:
        """The session a ShareFetch at ``epoch`` uses, after adding and forgetting partitions."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_entries and not self._evict_one(now_ms):
                return SessionResult(Errors.SHARE_SESSION_LIMIT_REACHED)
            session = self._sessions[key] = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH),
                                                         dict(added), now_ms)
            return SessionResult(session=session)
        session = self._sessions.get(key)
        if session is None:
            return SessionResult(Errors.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return SessionResult(session=session, closed=True)
        if epoch != session.epoch:
            return SessionResult(Errors.INVALID_SHARE_SESSION_EPOCH)
        for partition in forgotten:
            session.partitions.pop(partition, None)
        session.partitions.update(added)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(key)
        return SessionResult(session=session)

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int, now_ms: int) -> SessionResult:
        """The session a ShareAcknowledge at ``epoch`` uses (epoch 0 cannot acknowledge anything)."""
        if epoch == INITIAL_EPOCH:
            return SessionResult(Errors.INVALID_SHARE_SESSION_EPOCH)
        return self.new_context(group_id, member_id, epoch, (), (), now_ms)

    def remove_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def _evict_one(self, now_ms: int) -> bool:
        for key, session in self._sessions.items():  # least recently used first
            if now_ms - session.last_used_ms >= self.eviction_ms:
                del self._sessions[key]
                return True
            return False
        return False
