"""A rolling replacement of every Kafka 3.9 broker by ours, and back, under load.

Kafka's rolling-upgrade procedure, one broker at a time: stop it cleanly, start the new broker with
the same broker.id on the same log dir, wait until every partition's ISR is full again. Ours must
take Kafka's log dir as it is (meta.properties, the clean-shutdown marker, the checkpoints, rolled
segments with their indexes and producer snapshots, __consumer_offsets); then Kafka takes ours back
the same way. Meanwhile an idempotent acks=all producer writes and a consumer group reads and commits
through coordinators of both kinds: nothing acknowledged is lost, nothing is read twice, and no
broker of either kind needs to recover or re-index what the other wrote.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.numbered_messages import NumberedProducer, check_exactly_once, read_all
from tests.integration.mixed.mixed_support import (
    KAFKA, MIXED_DEFAULTS, OURS, MixedCluster, StartMixed, consume_and_commit, create_topic, wait_for_full_isr,
    wait_for_identical_replicas,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
OFFSETS_PARTITIONS = int(MIXED_DEFAULTS["offsets.topic.num.partitions"])
# What a broker logs when it does not trust a log dir the other kind left after a clean stop.
OUR_DISTRUST = ("recovering unflushed segment", "rebuilding the indexes", "treating it as empty",
                "deleting segment", "found invalid data", "unusable producer snapshot", "leader-epoch checkpoint")
KAFKA_DISTRUST = ("Recovering unflushed segment", "corrupted index", "Found invalid", "No checkpointed highwatermark",
                  "Failed to load producer snapshot", "Malformed line in checkpoint file", "KafkaStorageException")


@pytest.fixture(scope="module")
def mixed(start_mixed: StartMixed) -> Iterator[MixedCluster]:
    yield start_mixed("kkk")


def test_rolling_replacement_of_every_kafka_broker_by_ours_and_back(mixed: MixedCluster) -> None:
    topic = f"rolling-{uuid.uuid4().hex[:8]}"
    group = f"rolling-group-{uuid.uuid4().hex[:8]}"
    # Small segments: Kafka's dirs hold rolled segments with their indexes and producer snapshots.
    create_topic(mixed, topic, [[0, 1, 2], [1, 2, 0], [2, 0, 1]],
                 {"min.insync.replicas": "2", "segment.bytes": str(16 * 1024)})
    producer = NumberedProducer(",".join(b.bootstrap for b in mixed.brokers), topic, PARTITIONS, rate=300)
    producer.start()
    consumed: list[int] = []
    try:
        producer.wait_for_progress(300)
        # A partition the group has not committed yet starts at the beginning; one whose offset got
        # lost would too, and be read twice.
        consumed += consume_and_commit(mixed, topic, group, 200, reset="earliest")
        for kind, distrust in ((OURS, OUR_DISTRUST), (KAFKA, KAFKA_DISTRUST)):
            for broker_id in range(len(mixed.brokers)):
                old = mixed.broker(broker_id)
                assert old.stop() == 0, f"{old} did not stop cleanly:\n{old.log_tail()}"
                _assert_left_as_kafka_leaves_it(old)
                new = mixed.replace(broker_id, kind)
                wait_for_full_isr(mixed, topic, PARTITIONS)
                wait_for_full_isr(mixed, "__consumer_offsets", OFFSETS_PARTITIONS)
                _assert_trusted(new, distrust)
                producer.wait_for_progress(150)
                consumed += consume_and_commit(mixed, topic, group, 100, reset="earliest")
            assert all(mixed.kind(b) == kind for b in mixed.brokers)
    finally:
        producer.stop()
    read = read_all(mixed.brokers[0].bootstrap, topic, PARTITIONS)
    check_exactly_once(producer, read)
    assert sorted(consumed) == sorted(set(consumed)), "the group read a message twice"
    in_log_order = {p: [n for _, n in entries] for p, entries in read.items()}
    for partition in range(PARTITIONS):
        mine = [n for n in consumed if n % PARTITIONS == partition]
        assert mine == in_log_order[partition][:len(mine)], f"the group skipped messages of partition {partition}"
        wait_for_identical_replicas(mixed, topic, partition, [0, 1, 2])


def _assert_left_as_kafka_leaves_it(broker: BrokerProcess) -> None:
    """After a clean stop a ZooKeeper-mode Kafka 3.9 broker leaves ``.kafka_cleanshutdown`` without
    a broker epoch and no ``.lock``."""
    marker = broker.log_dir / ".kafka_cleanshutdown"
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": -1}, f"{broker!r}: {marker.read_text()}"
    assert not (broker.log_dir / ".lock").exists(), f"{broker!r} left its .lock behind"


def _assert_trusted(broker: BrokerProcess, distrust: tuple[str, ...]) -> None:
    """The broker loaded the other kind's log dir as clean: no recovery, no rebuilt index (in its
    log since its last start, which both kinds log as ``INFO starting (<their server class>)``)."""
    text = broker.log_path.read_text(errors="replace")
    text = text[max(text.rfind("INFO starting ("), 0):]
    found = [line for line in text.splitlines() if any(d in line for d in distrust)]
    assert not found, f"{broker!r} distrusted the log dir it took over:\n" + "\n".join(found[:10])
