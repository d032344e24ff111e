"""Either kind of broker can be the controller of a mixed cluster.

Brokers 0 and 2 are Kafka 3.9, 1 and 3 are ours. The controller is SIGKILLed until each kind has
held it (the other brokers of its kind stopped cleanly first, so the successor is of the other
kind), and under each the cluster keeps working: topics are created, leaders are elected after
controlled shutdowns, SIGKILLs and preferred elections, and an idempotent acks=all producer loses
nothing meanwhile, and a replica moves to another broker by reassignment. What each controller writes to ZooKeeper has the shape Kafka's does, and every
inter-broker request between the kinds uses the version a Kafka 3.9 broker sends, followers in
incremental fetch sessions (Kafka's request log shows what each kind sent it).
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness.kafka_broker import KafkaJavaBroker
from tests.harness.numbered_messages import NumberedProducer, check_exactly_once, read_all
from tests.integration.mixed.mixed_support import (
    KAFKA, OURS, MixedCluster, StartMixed, create_topic, delete_topic, elect_preferred, reassign, wait_for_full_isr,
    wait_for_identical_replicas, wait_for_leader,
)

pytestmark = pytest.mark.integration

# What a ZooKeeper-mode Kafka 3.9 broker (inter.broker.protocol.version 3.9) sends other brokers.
KAFKA_39_INTER_BROKER_VERSIONS = {
    "FETCH": 17, "OFFSET_FOR_LEADER_EPOCH": 4, "LIST_OFFSETS": 8, "ALTER_PARTITION": 3,
    "CONTROLLED_SHUTDOWN": 3, "ALLOCATE_PRODUCER_IDS": 0,
    "LEADER_AND_ISR": 7, "UPDATE_METADATA": 8, "STOP_REPLICA": 4,
}


@pytest.fixture(scope="module")
def mixed(start_mixed: StartMixed) -> Iterator[MixedCluster]:
    yield start_mixed("koko", request_log=True)


def test_either_kind_controls_the_cluster(mixed: MixedCluster) -> None:
    first = mixed.wait_for_controller()
    shapes = {mixed.kind(first): _exercise_controller(mixed, first)}
    second = _hand_over(mixed, first)
    shapes[mixed.kind(second)] = _exercise_controller(mixed, second)
    assert set(shapes) == {KAFKA, OURS}
    assert shapes[OURS] == shapes[KAFKA], "our controller's znodes differ in shape from Kafka's"
    third = _hand_over(mixed, second)  # and back: Kafka takes over from ours
    _exercise_controller(mixed, third, quick=True)
    _check_inter_broker_requests(mixed)


def _hand_over(mixed: MixedCluster, controller: Any) -> Any:
    """SIGKILL the controller with the other brokers of its kind stopped cleanly, so that one of
    the other kind must win the election; then bring every broker back."""
    same_kind = [b for b in mixed.of_kind(mixed.kind(controller)) if b is not controller]
    for broker in same_kind:
        broker.stop()
    controller.kill()
    successor = mixed.wait_for_controller(other_than=controller.broker_id)
    assert mixed.kind(successor) != mixed.kind(controller)
    mixed.restart_after_kill(controller)
    for broker in same_kind:
        broker.start(60)
    return successor


def _exercise_controller(mixed: MixedCluster, controller: Any, quick: bool = False) -> dict[str, Any]:
    """Under this controller: create a topic, move its leaders (controlled shutdown, SIGKILL,
    preferred election) under an acks=all producer; returns the shape of the znodes it wrote."""
    others = [b for b in mixed.brokers if b is not controller]
    other_kind = next(b for b in others if mixed.kind(b) != mixed.kind(controller))
    same_kind = next(b for b in others if mixed.kind(b) == mixed.kind(controller))
    rest = [b.broker_id for b in others if b not in (other_kind, same_kind)] + [controller.broker_id]
    # p0 led by a broker of the other kind, p1 by one of the controller's kind; RF 3 across kinds.
    assignment = [[other_kind.broker_id, same_kind.broker_id, rest[0]],
                  [same_kind.broker_id, rest[0], other_kind.broker_id]]
    topic = f"controlled-by-{mixed.kind(controller)}-{uuid.uuid4().hex[:6]}"
    create_topic(mixed, topic, assignment, {"min.insync.replicas": "2"})
    producer = NumberedProducer(",".join(b.bootstrap for b in mixed.brokers), topic, 2, rate=300)
    producer.start()
    try:
        producer.wait_for_progress(100)
        if not quick:
            other_kind.stop()
            wait_for_leader(mixed, topic, 0, lambda leader: leader == same_kind.broker_id,
                            f"a leader for {topic}-0 after a controlled shutdown")
            other_kind.start(60)
            wait_for_full_isr(mixed, topic, 2)
            # The producer's batches the shutdown left unanswered reach the new leaders before the next
            # failure: killed now, the restarted replica could become leader with only its snapshot's
            # last batch per producer to recognise retries by, and librdkafka would call the retry of an
            # older unanswered batch a fatal sequence desynchronization (Kafka's snapshots keep one too).
            producer.wait_for_progress(50)
            same_kind.kill()
            wait_for_leader(mixed, topic, 1, lambda leader: leader == rest[0],
                            f"a leader for {topic}-1 after a SIGKILL")
            mixed.restart_after_kill(same_kind)
            wait_for_full_isr(mixed, topic, 2)
            producer.wait_for_progress(50)
            elect_preferred(mixed, topic, [0, 1])
            wait_for_leader(mixed, topic, 0, lambda leader: leader == other_kind.broker_id, "the preferred leader")
            wait_for_leader(mixed, topic, 1, lambda leader: leader == same_kind.broker_id, "the preferred leader")
            # Reassignment: p1 leaves rest[0] for the controller's broker, whose replica copies p1 from
            # a leader of either kind before the controller completes the move.
            assignment[1] = [same_kind.broker_id, other_kind.broker_id, controller.broker_id]
            reassign(mixed, topic, 1, assignment[1])
            wait_for_full_isr(mixed, topic, 2)
        producer.wait_for_progress(100)
    finally:
        producer.stop()
    check_exactly_once(producer, read_all(mixed.brokers[0].bootstrap, topic, 2))
    for partition, replicas in enumerate(assignment):
        wait_for_identical_replicas(mixed, topic, partition, replicas)
    shapes = _znode_shapes(mixed, topic)
    delete_topic(mixed, topic)  # StopReplica (delete) to replicas of both kinds
    leftover = [f"{b!r}: {topic}-{p}" for b in mixed.brokers for p in (0, 1) if (b.log_dir / f"{topic}-{p}").exists()]
    assert not leftover, f"replicas still there after the deletion: {leftover}"
    assert mixed.controller_id() == controller.broker_id, "the controller changed during the exercise"
    return shapes


def _shape(value: Any) -> Any:
    """A JSON value's structure: object keys with their values' shapes, lists by their elements', types."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())} if not all(k.isdigit() for k in value) \
            else {"<partition>": _shape(next(iter(value.values())))} if value else {}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


def _znode_shapes(mixed: MixedCluster, topic: str) -> dict[str, Any]:
    """What the controller wrote for this topic and itself, with values reduced to their shapes
    (and the values that must be equal kept)."""
    reader = mixed.zk()
    try:
        def get(path: str) -> Any:
            data, _ = reader.client.get(path)
            return json.loads(data)
        controller = get("/controller")
        state = get(f"/brokers/topics/{topic}/partitions/0/state")
        assignment = get(f"/brokers/topics/{topic}")
        return {
            "/controller": _shape(controller),
            "/controller values": (controller["version"], controller["kraftControllerEpoch"],
                                   controller["timestamp"].isdigit()),
            "/controller_epoch": _shape(get("/controller_epoch")),
            "topic": _shape(assignment),
            "topic values": (assignment["version"], assignment["adding_replicas"], assignment["removing_replicas"],
                             sorted(assignment["partitions"])),
            "partition state": _shape(state),
            "partition state version": state["version"],
            "topic config": get(f"/config/topics/{topic}"),
        }
    finally:
        reader.close()


def _sender(api: str, request: dict[str, Any]) -> int:
    """The broker that sent an inter-broker request, from its body (-1 for a client)."""
    if api in ("FETCH", "LIST_OFFSETS", "OFFSET_FOR_LEADER_EPOCH"):
        return int(request.get("replicaState", {}).get("replicaId", request.get("replicaId", -1)))
    if api in ("LEADER_AND_ISR", "UPDATE_METADATA", "STOP_REPLICA"):
        return int(request["controllerId"])
    if api in ("ALTER_PARTITION", "CONTROLLED_SHUTDOWN", "ALLOCATE_PRODUCER_IDS"):
        return int(request["brokerId"])
    return -1


def _check_inter_broker_requests(mixed: MixedCluster) -> None:
    """Every inter-broker request a Kafka broker got, from either kind, used Kafka 3.9's version, and
    followers of both kinds fetched in incremental fetch sessions."""
    sent: dict[tuple[str, str, int], int] = {}
    incremental_fetches = {KAFKA: 0, OURS: 0}
    for kafka in mixed.of_kind(KAFKA):
        assert isinstance(kafka, KafkaJavaBroker)
        for entry in kafka.received_requests():
            header, request = entry["requestHeader"], entry["request"]
            api = header["requestApiKeyName"]
            if api not in KAFKA_39_INTER_BROKER_VERSIONS or _sender(api, request) < 0:
                continue
            sender = mixed.kind(mixed.broker(_sender(api, request)))
            key = (api, sender, header["requestApiVersion"])
            sent[key] = sent.get(key, 0) + 1
            if api == "FETCH" and request["sessionEpoch"] > 0:
                incremental_fetches[sender] += 1
    assert incremental_fetches[KAFKA] and incremental_fetches[OURS], \
        f"fetches in incremental sessions, by the follower's kind: {incremental_fetches}"
    wrong = {key: n for key, n in sent.items() if key[2] != KAFKA_39_INTER_BROKER_VERSIONS[key[0]]}
    assert not wrong, f"inter-broker requests at other versions than Kafka 3.9's (api, sender, version): {wrong}"
    ours = {api for api, kind, _ in sent if kind == OURS}
    assert {"FETCH", "ALTER_PARTITION", "CONTROLLED_SHUTDOWN", "LEADER_AND_ISR", "UPDATE_METADATA",
            "STOP_REPLICA"} <= ours, f"the requests our brokers sent Kafka's: {sorted(ours)}"
