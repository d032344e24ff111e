"""A diverged log is truncated after a leader change (OffsetsForLeaderEpoch), on real brokers.

Leader A takes acks=1 writes that follower B never fetches (B is paused with SIGSTOP but stays
in the ISR, replica.lag.time.max.ms being long); A dies (SIGKILL); B resumes and is elected
cleanly (it is in the ISR) and takes new writes; when A returns it must cut the tail B never
had at the end of B's epoch, then copy B: both replicas end with byte-identical segments and
the acks=1 writes only A had are gone from both.
"""
from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import Errors
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import (
    StartCluster,
    agreed_state,
    controller_id,
    create_topic,
    produce_raw,
    read_partition,
    segment_files,
    segments_identical,
    wait_for_isr,
    zk_reader,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
pytest.importorskip("confluent_kafka")

FETCH_WAIT_MS = 100
OVERRIDES = {
    "replica.lag.time.max.ms": "30000",  # B stays in the ISR while paused
    "replica.fetch.wait.max.ms": str(FETCH_WAIT_MS),
}


def test_returning_leader_truncates_the_tail_the_new_leader_never_had(start_cluster: StartCluster,
                                                                      zk_connect: str) -> None:
    cluster = start_cluster(3, OVERRIDES)
    controller = cluster.brokers[controller_id(cluster)]
    a, b = (broker for broker in cluster.brokers if broker is not controller)
    topic = f"diverge-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, [a.broker_id, b.broker_id])
    common = [b"common-%d" % i for i in range(10)]
    diverged = [b"diverged-%d" % i for i in range(10)]
    new = [b"new-%d" % i for i in range(5)]
    with zk_reader(zk_connect) as zk:
        start = wait_for_isr(cluster, zk, topic, [a.broker_id, b.broker_id])
        assert start.leader == a.broker_id
        assert produce_raw(a, topic, common, acks=-1).error_code == Errors.NONE

        b.pause()
        try:
            # A fetch B sent before the pause is answered (empty) within replica.fetch.wait.max.ms;
            # after that nothing carries A's next writes to B.
            time.sleep(5 * FETCH_WAIT_MS / 1000)
            for i, value in enumerate(diverged):
                response = produce_raw(a, topic, [value], acks=1)
                assert (response.error_code, response.base_offset) == (Errors.NONE, len(common) + i)
            a.kill()
        finally:
            b.resume()

        # A's ZooKeeper session expires; B, still in the ISR, is elected cleanly.
        elected = wait_for(lambda: (v := agreed_state(cluster, zk, topic)) is not None
                           and v.leader == b.broker_id and v, "B to lead")
        assert elected.isr == (b.broker_id,)
        assert elected.leader_epoch > start.leader_epoch
        assert produce_raw(b, topic, new, acks=-1).error_code == Errors.NONE

        a.wait_until_deregistered()
        a.start()
        rejoined = wait_for_isr(cluster, zk, topic, [a.broker_id, b.broker_id])
        assert rejoined.leader == b.broker_id
    a_log = a.log_path.read_text(errors="replace")
    assert f"Truncating {topic}-0 to offset {len(common)} (log end was {len(common) + len(diverged)})" in a_log
    wait_for(lambda: segments_identical([a, b], topic), "A's segments to equal B's")
    for broker in (a, b):
        assert not any(b"diverged-" in data for data in segment_files(broker, topic).values()), \
            f"broker {broker.broker_id} still holds the diverged writes"
    assert read_partition(cluster.bootstrap, topic) == common + new
