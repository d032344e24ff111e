"""A follower's incremental fetch sessions (FetchSessionHandler), as Kafka's followers keep them."""
from __future__ import annotations

import uuid

from broker.replication.fetch_session_handler import FetchSessionHandler
from protocol.errors import Errors
from protocol.messages import FetchRequest

TOPIC_ID = uuid.uuid4()


def _parts(**offsets: int) -> dict[tuple[str, int], tuple[uuid.UUID, FetchRequest.FetchPartition]]:
    """Partitions of topic t by index name (p0=5 is partition 0 at fetch offset 5)."""
    return {("t", int(name[1:])): (TOPIC_ID, FetchRequest.FetchPartition(partition=int(name[1:]), fetch_offset=offset))
            for name, offset in offsets.items()}


def test_a_session_opens_with_a_full_fetch_then_sends_only_changes() -> None:
    handler = FetchSessionHandler()
    first = handler.build(_parts(p0=0, p1=0), by_id=True)
    assert (first.session_id, first.epoch, sorted(first.partitions)) == (0, 0, [("t", 0), ("t", 1)])
    handler.handle_response(first, 0, session_id=77)
    second = handler.build(_parts(p0=5, p1=0), by_id=True)
    assert (second.session_id, second.epoch, list(second.partitions), second.forgotten) == (77, 1, [("t", 0)], [])
    handler.handle_response(second, 0, session_id=77)
    third = handler.build(_parts(p0=5), by_id=True)  # p1 no longer fetched (backing off, removed)
    assert (third.epoch, third.partitions, third.forgotten) == (2, {}, [("t", 1)])
    assert third.forgotten_topic_ids == {"t": TOPIC_ID}


def test_a_session_error_starts_over_with_a_full_fetch_closing_the_old_session() -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build(_parts(p0=0), by_id=True), 0, session_id=77)
    incremental = handler.build(_parts(p0=3), by_id=True)
    handler.handle_response(incremental, int(Errors.INVALID_FETCH_SESSION_EPOCH), session_id=0)
    again = handler.build(_parts(p0=3), by_id=True)
    assert (again.session_id, again.epoch, list(again.partitions)) == (77, 0, [("t", 0)])
    handler.handle_response(again, int(Errors.FETCH_SESSION_ID_NOT_FOUND), session_id=0)
    assert (handler.build(_parts(p0=3), by_id=True).session_id, handler.next_epoch) == (0, 0)


def test_a_lost_connection_starts_over_under_the_same_session() -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build(_parts(p0=0), by_id=True), 0, session_id=77)
    handler.build(_parts(p0=3), by_id=True)
    handler.handle_error()
    assert (handler.build(_parts(p0=3), by_id=True).session_id, handler.next_epoch) == (77, 0)


def test_a_leader_without_sessions_gets_full_fetches() -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build(_parts(p0=0), by_id=True), 0, session_id=0)
    fetch = handler.build(_parts(p0=0), by_id=True)
    assert (fetch.session_id, fetch.epoch, list(fetch.partitions)) == (0, 0, [("t", 0)])


def test_switching_between_names_and_topic_ids_opens_a_new_session() -> None:
    handler = FetchSessionHandler()
    handler.handle_response(handler.build(_parts(p0=0), by_id=False), 0, session_id=9)
    fetch = handler.build(_parts(p0=0), by_id=True)
    assert (fetch.session_id, fetch.epoch) == (9, 0)
