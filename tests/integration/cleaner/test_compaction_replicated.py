"""A compacted topic replicated on three brokers: every replica cleans its own log (as in Kafka),
and after a leader change followers copy the new leader's cleaned data correctly, gaps and all."""
from __future__ import annotations

import shutil

import pytest

from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.cleaner.compaction_support import (
    COMPACTED,
    Workload,
    cleaner_checkpoint,
    log_dir_records,
    produce_key_updates,
    read_from_start,
    unique,
)

pytestmark = pytest.mark.integration


def _leader(broker: BrokerProcess, topic: str) -> int:
    return broker.metadata([topic]).topics[0].partitions[0].leader_id


@pytest.mark.parametrize("cluster3", [{"log.cleaner.backoff.ms": "100"}], indirect=True)
def test_replicas_clean_their_own_logs_and_followers_copy_a_new_leaders_cleaned_data(cluster3: BrokerCluster) -> None:
    cluster = cluster3
    topic = unique("replicated")
    first = cluster.brokers[0]
    first.create_topic(topic, replication_factor=3, configs={**COMPACTED, "segment.bytes": "4096"})
    workload = Workload()
    produce_key_updates(cluster.bootstrap, topic, workload, keys=80, rounds=4, codec="lz4", tombstone_every=10)
    produce_key_updates(cluster.bootstrap, topic, Workload(), keys=60, rounds=1, codec="none", prefix="tail")
    for broker in cluster.brokers:  # each replica's own cleaner compacts its copy
        wait_for(lambda b=broker: cleaner_checkpoint(b.log_dir, topic) > 0, f"broker {broker.broker_id} cleaning", 60)
    old_leader = cluster.brokers[_leader(first, topic)]
    old_leader.stop()
    others = [b for b in cluster.brokers if b is not old_leader]
    wait_for(lambda: _leader(others[0], topic) in (others[0].broker_id, others[1].broker_id), "a new leader", 30)
    bootstrap = ",".join(b.bootstrap for b in others)
    produce_key_updates(bootstrap, topic, workload, keys=80, rounds=2, codec="zstd", tombstone_every=7)
    produce_key_updates(bootstrap, topic, Workload(), keys=60, rounds=1, codec="none", prefix="tail2")
    back = read_from_start(bootstrap, topic)
    assert {k: v for k, v in back.latest.items() if k.startswith(b"key-")} == workload.latest
    # the old leader comes back with an empty disk: it copies the new leader's cleaned log from offset 0
    shutil.rmtree(old_leader.log_dir / f"{topic}-0")
    old_leader.start()
    end = back.offsets[-1] + 1

    def replicas_caught_up() -> bool:
        ends = [log_dir_records(b.log_dir / f"{topic}-0")[0] for b in cluster.brokers]
        return all(offsets and offsets[-1] == end - 1 for offsets in ends)

    wait_for(replicas_caught_up, "every replica at the log end", 60, interval=0.2)
    for broker in cluster.brokers:
        offsets, latest = log_dir_records(broker.log_dir / f"{topic}-0")
        assert {k: v for k, v in latest.items() if k.startswith(b"key-")} == workload.latest, broker.broker_id
        assert offsets == sorted(set(offsets)) and len(offsets) < workload.produced
