"""Long polls across replication on real brokers: an append wakes the followers' waiting fetches,
and the follower fetch that moves the high watermark wakes the consumers waiting for it.

Followers wait up to 25 s per fetch here and the consumer's fetch up to 60 s, while the
consumer's client gives up after 20 s: the record can only arrive in time if both wake-ups
happen, not by any long poll running out.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import FetchRequest
from protocol.records.log_entry import iter_log_entries
from tests.integration.replication.replication_support import (
    StartCluster,
    create_topic,
    produce_raw,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FOLLOWER_WAIT_MS = 25000
CONSUMER_WAIT_MS = 60000
CLIENT_TIMEOUT_S = 20.0


def _consumer_fetch(topic: str, offset: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=CONSUMER_WAIT_MS, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[FetchRequest.FetchTopic(
            topic=topic, partitions=[FetchRequest.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                partition_max_bytes=1 << 20)])])


def test_consumer_long_poll_completes_when_followers_move_the_high_watermark(start_cluster: StartCluster,
                                                                           zk_connect: str) -> None:
    cluster = start_cluster(3, {"replica.fetch.wait.max.ms": str(FOLLOWER_WAIT_MS)})
    topic = f"longpoll-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [0, 1, 2])
    with zk_reader(zk_connect) as zk:
        leader = cluster.brokers[wait_for_isr(cluster, zk, topic, [0, 1, 2]).leader]
    assert produce_raw(leader, topic, [b"first"], acks=-1).error_code == Errors.NONE
    # every follower is now parked in a long poll at offset 1, and so is this consumer
    answers: list[Any] = []
    failures: list[BaseException] = []

    def poll() -> None:
        try:
            answers.append(leader.request(ApiKey.FETCH, 12, _consumer_fetch(topic, 1), timeout=CLIENT_TIMEOUT_S))
        except BaseException as exc:  # noqa: BLE001 (reported by the test thread)
            failures.append(exc)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        # acks=1: the leader answers at once; the high watermark moves only when both followers
        # have fetched the record and come back for the next offset
        assert produce_raw(leader, topic, [b"second"], acks=1).error_code == Errors.NONE
    finally:
        poller.join(CLIENT_TIMEOUT_S + 10)
    assert not failures, f"the consumer's long poll was not woken: {failures[0]!r}"
    (partition,) = answers[0].responses[0].partitions
    assert partition.error_code == Errors.NONE and partition.high_watermark == 2
    assert [h.base_offset for _pos, h in iter_log_entries(bytes(partition.records))] == [1]
