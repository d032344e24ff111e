"""The KafkaController ControllerState gauge (Kafka's state for the event being handled, Idle between),
ControllerStats' timer of each state, and the ControllerEventManager's queue metrics."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from coordination.controller.controller_metrics import CONTROLLER_STATES, IDLE, STATE_TIMERS
from coordination.controller.event_manager import ControllerEvent, ControllerEventManager
from coordination.controller.kafka_controller import KafkaController


def test_every_controller_event_has_kafkas_state_and_idle_follows() -> None:
    controller = KafkaController(SimpleNamespace(), 0)  # no ZooKeeper: only the event handling runs
    assert set(controller._handlers) <= set(CONTROLLER_STATES)
    seen: list[int] = []
    controller._handlers["broker_change"] = lambda: seen.append(controller.metrics.state)
    controller._handlers["alter_partition"] = lambda: seen.append(controller.metrics.state)
    controller._process(ControllerEvent("broker_change"))
    controller._process(ControllerEvent("alter_partition"))
    assert seen == [2, 9]  # BrokerChange, IsrChange
    assert controller.metrics.state == IDLE


def test_each_event_is_timed_under_its_states_timer_with_kafkas_names() -> None:
    controller = KafkaController(SimpleNamespace(), 0)
    for name in ("broker_change", "broker_modification", "topic_change", "alter_partition"):
        controller._handlers[name] = lambda *args: None
        controller._process(ControllerEvent(name))
    counts = {STATE_TIMERS[state]: timer.count for state, timer in controller.metrics.state_times_ms.items()}
    # BrokerChange's timer keeps its old name; its events are broker changes and modifications
    assert {name: count for name, count in counts.items() if count} == {
        "LeaderElectionRateAndTimeMs": 2, "TopicChangeRateAndTimeMs": 1, "IsrChangeRateAndTimeMs": 1}
    assert sorted(counts) == sorted([  # every timer of Kafka 3.9's ControllerStats, from the start
        "ControllerChangeRateAndTimeMs", "LeaderElectionRateAndTimeMs", "TopicChangeRateAndTimeMs",
        "TopicDeletionRateAndTimeMs", "PartitionReassignmentRateAndTimeMs", "AutoLeaderBalanceRateAndTimeMs",
        "ManualLeaderBalanceRateAndTimeMs", "ControlledShutdownRateAndTimeMs", "IsrChangeRateAndTimeMs",
        "LeaderAndIsrResponseReceivedRateAndTimeMs", "LogDirChangeRateAndTimeMs", "ControllerShutdownRateAndTimeMs",
        "UncleanLeaderElectionEnableRateAndTimeMs", "TopicUncleanLeaderElectionEnableRateAndTimeMs",
        "ListPartitionReassignmentRateAndTimeMs", "UpdateFeaturesRateAndTimeMs"])


def test_the_event_manager_measures_queue_time_and_size() -> None:
    started = threading.Event()
    release = threading.Event()

    def process(event: ControllerEvent) -> None:
        started.set()
        release.wait(10)

    manager = ControllerEventManager(process)
    manager.start()
    try:
        manager.put(ControllerEvent("first"))
        assert started.wait(10)
        manager.put(ControllerEvent("second"))  # waits behind the first
        assert manager.queue_size == 1
        time.sleep(0.05)
        release.set()
        manager.put(ControllerEvent("third"))
    finally:
        manager.close()
    assert manager.queue_size == 0
    assert manager.queue_time_ms.count == 3
    assert max(manager.queue_time_ms.samples) >= 50
