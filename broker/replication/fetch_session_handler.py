"""FetchSessionHandler: a follower's side of incremental fetch sessions (KIP-227), as Kafka's.

A fetcher opens a session with a full fetch (epoch 0, every partition); the leader answers with a
session id, and from then on each fetch carries only the partitions whose fetch state changed
(offset, log start, epochs, limits) and names the ones no longer fetched as forgotten, while the
leader remembers the rest. An error, a lost connection, or a switch between fetching by name and
by topic id starts over with a full fetch at epoch 0 under the old session id, which the leader
takes as closing that session and opening a new one (under id 0 when the leader no longer knew it). A leader that answers a full fetch with
session id 0 keeps no session: every fetch stays full.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import Errors

INITIAL_EPOCH = 0
INVALID_SESSION_ID = 0
FETCH_SESSION_ID_NOT_FOUND = int(Errors.FETCH_SESSION_ID_NOT_FOUND)
TopicPartition = tuple[str, int]


@dataclass
class SessionFetch:
    """What one fetch sends: the session header, the partitions to send and those to forget."""

    session_id: int
    epoch: int
    partitions: dict[TopicPartition, Any]  # FetchRequest.FetchPartition
    forgotten: list[TopicPartition]
    forgotten_topic_ids: dict[str, uuid.UUID | None] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        self._by_id: bool | None = None
        self._sent: dict[TopicPartition, tuple[uuid.UUID | None, Any]] = {}  # what the leader remembers
        self._pending: dict[TopicPartition, tuple[uuid.UUID | None, Any]] = {}  # in flight

    def build(self, partitions: dict[TopicPartition, tuple[uuid.UUID | None, Any]], by_id: bool) -> SessionFetch:
        """The next fetch for ``partitions`` (tp -> (topic id, FetchPartition))."""
        if by_id != self._by_id:
            self.next_epoch = INITIAL_EPOCH  # a session is by name or by id, never both
            self._by_id = by_id
        self._pending = dict(partitions)
        if self.next_epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, {tp: p for tp, (_, p) in partitions.items()}, [])
        changed = {tp: p for tp, (topic_id, p) in partitions.items() if self._sent.get(tp) != (topic_id, p)}
        forgotten = [tp for tp in self._sent if tp not in partitions]
        return SessionFetch(self.session_id, self.next_epoch, changed, forgotten,
                            {tp[0]: self._sent[tp][0] for tp in forgotten})

    def handle_response(self, fetch: SessionFetch, error_code: int, session_id: int) -> None:
        """After the leader answered ``fetch`` (error_code is the response's top-level error)."""
        if error_code:
            if error_code == FETCH_SESSION_ID_NOT_FOUND:  # nothing to close on the leader
                self.session_id = INVALID_SESSION_ID
            self.handle_error()
            return
        if session_id == INVALID_SESSION_ID:  # no session kept (or the leader closed it): full fetches
            self.session_id, self.next_epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        else:
            self.session_id = session_id
            self.next_epoch = 1 if fetch.full or self.next_epoch == 0x7FFFFFFF else self.next_epoch + 1
        self._sent = self._pending

    def handle_error(self) -> None:
        """The fetch failed: start over with a full fetch that closes the leader's session."""
        self.next_epoch = INITIAL_EPOCH
        self._sent = {}
