"""Offset commits from members that leave, as Kafka 3.9's GroupCoordinator.handleCommitOffsets answers them.

Its order: a dead group is COORDINATOR_NOT_AVAILABLE, a fenced static member FENCED_INSTANCE_ID, an
Empty group takes any commit without a generation (it only stores offsets), and otherwise only a
current member of the current generation commits (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), not while
the group completes a rebalance (REBALANCE_IN_PROGRESS). Every answer here was taken from a real
3.9 broker given the same requests.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import JoinGroupRequest, LeaveGroupRequest
from tests.harness.broker import BrokerConnection, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import (
    CONFLUENT_TIMEOUTS,
    commit,
    join_group,
    produce,
    stable_member,
    unique,
    wait_for_coordinator,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.fixture(scope="module")
def topic(module_broker: BrokerProcess) -> Iterator[str]:
    name = unique("leaving")
    module_broker.create_topic(name, PARTITIONS)
    produce(module_broker.bootstrap, name, PARTITIONS, 50)
    wait_for_coordinator(module_broker, unique("warm-up"))
    yield name


def _join_request(group: str, member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                            member_id=member_id, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"x")])


def test_a_member_that_left_during_a_rebalance_cannot_commit(module_broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    member, generation = stable_member(module_broker, group)
    newcomer = join_group(module_broker, group).member_id  # MEMBER_ID_REQUIRED
    with BrokerConnection(module_broker.port) as waiting:
        waiting.send(ApiKey.JOIN_GROUP, 5, _join_request(group, newcomer))  # parked until the group rebalances
        wait_for(lambda: commit(module_broker, group, topic, member_id=member, generation=generation) is Errors.NONE,
                 "a commit by the member while the group prepares its rebalance")
        left = module_broker.request(ApiKey.LEAVE_GROUP, 4, LeaveGroupRequest(
            group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=member)]))
        assert [m.error_code for m in left.members] == [Errors.NONE]
        for member_id, gen in ((member, generation), (member, -1), ("", -1), ("", generation)):
            assert commit(module_broker, group, topic, member_id=member_id, generation=gen, offset=9) is \
                Errors.UNKNOWN_MEMBER_ID
        joined = waiting.read(ApiKey.JOIN_GROUP, 5)  # the departure completed the rebalance
    assert (joined.error_code, joined.member_id, joined.generation_id) == (Errors.NONE, newcomer, generation + 1)
    # The newcomer may not commit before its SyncGroup.
    assert commit(module_broker, group, topic, member_id=newcomer, generation=joined.generation_id) is \
        Errors.REBALANCE_IN_PROGRESS


def test_an_empty_group_takes_commits_without_a_generation_whatever_member_they_name(
        module_broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    member, generation = stable_member(module_broker, group)
    left = module_broker.request(ApiKey.LEAVE_GROUP, 4, LeaveGroupRequest(
        group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=member)]))
    assert [m.error_code for m in left.members] == [Errors.NONE]
    for member_id in ("", member, "someone-else"):
        assert commit(module_broker, group, topic, member_id=member_id, generation=-1) is Errors.NONE
    assert commit(module_broker, group, topic, member_id=member, generation=generation) is Errors.UNKNOWN_MEMBER_ID
    never = unique("never")
    assert commit(module_broker, never, topic, member_id="someone", generation=-1) is Errors.NONE
    assert commit(module_broker, unique("never"), topic, member_id="someone", generation=3) is \
        Errors.ILLEGAL_GENERATION


def _committed(module_broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group})
    try:
        found = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        probe.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_consumer_closed_during_a_rebalance_commits_only_what_the_group_stores(
        module_broker: BrokerProcess, topic: str, strategy: str) -> None:
    """librdkafka commits while it closes; whatever the coordinator answers, the offsets it reports
    as committed are the group's and the ones refused are not."""
    group = unique("g")
    reported: list[tuple[Any, list[Any]]] = []

    def consumer(name: str, auto_commit: bool) -> Consumer:
        return Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group, "client.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": auto_commit,
                         "auto.commit.interval.ms": 60000, "partition.assignment.strategy": strategy,
                         **CONFLUENT_TIMEOUTS},
                        **({"on_commit": lambda err, parts: reported.append((err, parts))} if auto_commit else {}))

    closing = consumer("closing", auto_commit=True)
    closing.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < 20 and time.monotonic() < deadline:
        message = closing.poll(0.2)
        consumed += message is not None and message.error() is None
    assert consumed >= 20
    staying = consumer("staying", auto_commit=False)
    staying.subscribe([topic])
    for _ in range(10):  # the newcomer's join starts a rebalance the closing consumer hears of
        staying.poll(0.1)
        closing.poll(0.05)
    closing.close()

    def staying_owns_everything() -> bool:
        staying.poll(0.2)
        return len(staying.assignment()) == PARTITIONS

    wait_for(staying_owns_everything, "the staying consumer owning every partition")
    staying.close()
    stored = _committed(module_broker, group, topic)
    succeeded: dict[int, int] = {}
    for err, parts in reported:
        for tp in parts:
            if tp.offset < 0:
                continue
            if err is None and tp.error is None:
                succeeded[tp.partition] = tp.offset
            else:
                refusal = err or tp.error
                assert refusal.code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION,
                                          KafkaError.REBALANCE_IN_PROGRESS), refusal
    assert reported, "the closing consumer committed nothing"
    assert stored == succeeded
