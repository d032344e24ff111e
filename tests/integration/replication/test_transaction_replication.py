"""Transactions across replicas: followers copy the markers and keep the producer state, the LSO
and the .txnindex themselves, so a follower that becomes leader (its leader SIGKILLed) serves
read_committed consumers the same last stable offset and aborted transactions."""
from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import Errors
from storage.transaction_index import AbortedTxn
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import (
    READ_COMMITTED,
    aborted,
    fetch,
    idempotent_producer_id,
    latest_offset,
    produce,
    txn_batch,
    txn_index_entries,
    values,
    write_markers,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "txn-replicated"


def _leader(cluster: BrokerCluster, exclude: int | None = None) -> BrokerProcess:
    def find() -> BrokerProcess | None:
        for asking in cluster.brokers:
            if asking.broker_id == exclude:
                continue
            (partition,) = asking.metadata([TOPIC]).topics[0].partitions
            if partition.leader_id >= 0 and partition.leader_id != exclude:
                return cluster.brokers[partition.leader_id]
        return None

    return wait_for(find, "a leader", 60)


def test_a_new_leader_serves_the_same_lso_and_aborted_transactions(zk_connect: str, tmp_path: Path) -> None:
    cluster = BrokerCluster(3, zk_connect, tmp_path, {"transaction.partition.verification.enable": "false"})
    try:
        cluster.start()
        cluster.brokers[0].create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        leader = _leader(cluster)
        aborter, committer, still_open = (idempotent_producer_id(leader) for _ in range(3))
        for pid, value in ((aborter, b"a"), (committer, b"c"), (still_open, b"o")):
            assert produce(leader, TOPIC, txn_batch([value, value], pid, 0)).error_code == 0  # 0-1, 2-3, 4-5
        assert write_markers(leader, aborter, False, {TOPIC: [0]}) == {(TOPIC, 0): 0}  # 6
        assert write_markers(leader, committer, True, {TOPIC: [0]}) == {(TOPIC, 0): 0}  # 7
        assert latest_offset(leader, TOPIC, READ_COMMITTED) == 4
        expected_index = [AbortedTxn(aborter, 0, 6, 2)]  # the LSO then: the committer's open transaction
        for follower in cluster.brokers:
            wait_for(lambda b=follower: txn_index_entries(b, TOPIC) == expected_index,
                     f"broker {follower.broker_id}'s .txnindex", 30)

        leader.kill()
        new_leader = _leader(cluster, exclude=leader.broker_id)

        def committed_view() -> tuple[int, list[tuple[int, int]] | None, list[bytes]] | None:
            answer = fetch(new_leader, TOPIC, READ_COMMITTED)
            if answer.error_code != Errors.NONE or answer.high_watermark < 8:
                return None  # not leader yet, or its high watermark still catching up
            return answer.last_stable_offset, aborted(answer), [v for _, v in values(answer.records)]

        lso, aborted_txns, read = wait_for(committed_view, "the new leader's read_committed view", 60)
        assert lso == 4 and aborted_txns == [(aborter, 0)]
        assert read == [b"a", b"a", b"c", b"c"]  # the consumer drops the aborted pair with the index
        assert write_markers(new_leader, still_open, True, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        assert latest_offset(new_leader, TOPIC, READ_COMMITTED) == 9
    finally:
        cluster.stop()
