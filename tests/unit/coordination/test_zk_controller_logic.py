"""Pure controller logic: leader election algorithms, state transitions, the event manager and the
controller requests a batch builds."""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from coordination.controller.context import ControllerContext
from coordination.controller.election import ElectionStrategy, elect_leader, offline_partition_leader
from coordination.controller.event_manager import ControllerEvent, ControllerEventManager
from coordination.controller.request_batch import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    ControllerBrokerRequestBatch,
)
from coordination.controller.states import (
    PartitionState,
    ReplicaState,
    is_valid_partition_transition,
    is_valid_replica_transition,
)
from coordination.model import (
    BrokerEndPoint,
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    SecurityProtocol,
    TopicPartition,
    random_uuid_b64,
)

STATE = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), partition_epoch=9)


def test_offline_election_prefers_assignment_order_within_live_isr() -> None:
    result = elect_leader(ElectionStrategy.OFFLINE, STATE, (1, 2, 3), live={2, 3})
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3), partition_epoch=9)
    assert result.replicas_to_notify == (2, 3)


def test_unclean_election_only_when_enabled() -> None:
    state = LeaderAndIsr(leader=-1, leader_epoch=4, isr=(1,))
    assert elect_leader(ElectionStrategy.OFFLINE, state, (1, 2), live={2}).leader_and_isr is None
    unclean = elect_leader(ElectionStrategy.OFFLINE, state, (1, 2), live={2}, unclean_enabled=True)
    assert unclean.leader_and_isr == LeaderAndIsr(2, 5, (2,), LeaderRecoveryState.RECOVERING)
    assert offline_partition_leader((1, 2), (1,), {2}, True) == (2, True)
    forced = elect_leader(ElectionStrategy.OFFLINE_ALLOW_UNCLEAN, state, (1, 2), live={2})
    assert forced.leader_and_isr is not None and forced.leader_and_isr.leader == 2


def test_preferred_and_reassignment_elections() -> None:
    state = LeaderAndIsr(leader=2, leader_epoch=1, isr=(1, 2))
    assert elect_leader(ElectionStrategy.PREFERRED, state, (1, 2), live={1, 2}).leader_and_isr == (
        LeaderAndIsr(1, 2, (1, 2))
    )
    assert elect_leader(ElectionStrategy.PREFERRED, state, (3, 2), live={2, 3}).leader_and_isr is None
    moved = elect_leader(ElectionStrategy.REASSIGNMENT, state, (2, 3, 1), live={1, 2, 3}, target_replicas=(1, 3))
    assert moved.leader_and_isr == LeaderAndIsr(1, 2, (1, 2))


def test_controlled_shutdown_election_drops_the_broker_from_isr() -> None:
    result = elect_leader(
        ElectionStrategy.CONTROLLED_SHUTDOWN, STATE, (1, 2, 3), live={1, 2, 3}, shutting_down={1}
    )
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3), partition_epoch=9)
    assert result.replicas_to_notify == (2, 3)


@pytest.mark.parametrize(
    ("current", "target", "valid"),
    [
        (PartitionState.NON_EXISTENT, PartitionState.NEW, True),
        (PartitionState.NEW, PartitionState.ONLINE, True),
        (PartitionState.ONLINE, PartitionState.NON_EXISTENT, False),
        (PartitionState.OFFLINE, PartitionState.NON_EXISTENT, True),
        (PartitionState.ONLINE, PartitionState.NEW, False),
    ],
)
def test_partition_transitions(current: PartitionState, target: PartitionState, valid: bool) -> None:
    assert is_valid_partition_transition(current, target) is valid


@pytest.mark.parametrize(
    ("current", "target", "valid"),
    [
        (ReplicaState.NON_EXISTENT, ReplicaState.NEW, True),
        (ReplicaState.ONLINE, ReplicaState.DELETION_STARTED, False),
        (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, True),
        (ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL, True),
        (ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT, True),
        (ReplicaState.DELETION_INELIGIBLE, ReplicaState.ONLINE, True),
        (ReplicaState.NEW, ReplicaState.NON_EXISTENT, False),
    ],
)
def test_replica_transitions(current: ReplicaState, target: ReplicaState, valid: bool) -> None:
    assert is_valid_replica_transition(current, target) is valid


def test_event_manager_processes_in_order_and_reports_errors() -> None:
    seen: list[str] = []

    def process(event: ControllerEvent) -> Any:
        if event.name == "boom":
            raise ValueError("bad event")
        seen.append(event.name)
        return len(seen)

    manager = ControllerEventManager(process)
    manager.start()
    try:
        futures = [manager.put(ControllerEvent(name, (), Future())).future for name in ("a", "boom", "b")]
        assert futures[0].result(5) == 1
        with pytest.raises(ValueError, match="bad event"):
            futures[1].result(5)
        assert futures[2].result(5) == 2
        assert seen == ["a", "b"]
    finally:
        manager.close()


def test_clear_and_put_drops_pending_events() -> None:
    gate = threading.Event()
    manager = ControllerEventManager(lambda event: gate.wait(5) if event.name == "slow" else event.name)
    manager.start()
    try:
        manager.put(ControllerEvent("slow", (), Future()))
        pending = manager.put(ControllerEvent("pending", (), Future()))
        urgent = manager.clear_and_put(ControllerEvent("urgent", (), Future()))
        gate.set()
        assert urgent.future.result(5) == "urgent"
        with pytest.raises(RuntimeError, match="dropped"):
            pending.future.result(5)
    finally:
        manager.close()


class RecordingChannel:
    listener = "PLAINTEXT"

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, int, Any]] = []

    def send(self, broker_id: int, api_key: int, version: int, request: Any, callback: Any = None) -> None:
        self.sent.append((broker_id, api_key, version, request))


def test_batch_builds_one_request_of_each_kind_per_broker() -> None:
    context = ControllerContext(epoch=3)
    for broker_id in (1, 2):
        context.live_brokers[broker_id] = BrokerInfo(
            broker_id, (BrokerEndPoint("PLAINTEXT", "h", 9090 + broker_id, SecurityProtocol.PLAINTEXT),), epoch=100 + broker_id
        )
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    context.topic_ids["t"] = random_uuid_b64()
    for tp in (tp0, tp1):
        context.set_assignment(tp, ReplicaAssignment((1, 2)))
        context.leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), 3)
    channel = RecordingChannel()
    batch = ControllerBrokerRequestBatch(context, channel, controller_id=1)  # type: ignore[arg-type]
    batch.add_leader_and_isr([1, 2], tp0, context.leadership[tp0], is_new=True)
    batch.add_leader_and_isr([1, 2], tp1, context.leadership[tp1], is_new=True)
    batch.add_stop_replica([2], tp1, delete=False)
    batch.send()
    kinds = sorted((broker, key) for broker, key, _, _ in channel.sent)
    assert kinds == [(1, LEADER_AND_ISR), (1, UPDATE_METADATA), (2, LEADER_AND_ISR), (2, STOP_REPLICA), (2, UPDATE_METADATA)]
    lai = next(r for b, k, _, r in channel.sent if (b, k) == (2, LEADER_AND_ISR))
    assert lai.controller_epoch == 3 and lai.broker_epoch == 102
    assert [s.partition_index for s in lai.topic_states[0].partition_states] == [0, 1]
    assert lai.live_leaders[0].broker_id == 1 and lai.live_leaders[0].port == 9091
    for broker, key, version, request in channel.sent:
        request.encode(version)  # every request is valid at the version sent
    batch.send()
    assert len(channel.sent) == 5  # the batch was emptied


def test_every_coordination_error_names_a_kafka_error_code() -> None:
    import coordination.controller.partition_state_machine as psm
    import coordination.controller_epoch as fence
    import coordination.errors as errors
    from protocol.errors import Errors

    classes = [
        obj
        for module in (errors, psm, fence)
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, errors.CoordinationError)
    ]
    assert len(classes) > 15
    for cls in classes:
        assert cls.kafka_error in Errors.__members__, cls
