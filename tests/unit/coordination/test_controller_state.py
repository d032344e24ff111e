"""The KafkaController ControllerState gauge: Kafka's state for the event being handled, Idle between."""
from __future__ import annotations

from types import SimpleNamespace

from coordination.controller.controller_metrics import CONTROLLER_STATES, IDLE
from coordination.controller.event_manager import ControllerEvent
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
