"""A cluster of brokers registered in a real ZooKeeper through the real registration path (each
with a controller request sink as its endpoint), optionally running in-process controllers."""
from __future__ import annotations

from dataclasses import dataclass, field

from coordination.broker_registration import BrokerRegistration
from coordination.controller.kafka_controller import ControllerConfig, KafkaController
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import BrokerEndPoint, BrokerInfo, SecurityProtocol
from tests.harness.controller_request_sink import ControllerRequestSink

SESSION_TIMEOUT_MS = 4000


@dataclass
class RegisteredBroker:
    broker_id: int
    zk: KafkaZkClient
    sink: ControllerRequestSink
    info: BrokerInfo
    epoch: int
    controller: KafkaController | None = None


@dataclass
class Cluster:
    connect: str
    brokers: dict[int, RegisteredBroker] = field(default_factory=dict)

    def add_broker(self, broker_id: int, rack: str | None = None, controller: bool = False,
                   config: ControllerConfig | None = None) -> RegisteredBroker:
        zk = KafkaZkClient.connect(self.connect, session_timeout_ms=SESSION_TIMEOUT_MS, name=f"broker-{broker_id}")
        zk.create_top_level_paths()
        sink = ControllerRequestSink()
        info = BrokerInfo(
            broker_id,
            (BrokerEndPoint("PLAINTEXT", sink.host, sink.port, SecurityProtocol.PLAINTEXT),),
            rack=rack,
            timestamp_ms=1718446835000,
        )
        registration = BrokerRegistration(zk, info)
        broker = RegisteredBroker(broker_id, zk, sink, info, registration.register())
        if controller:
            broker.controller = KafkaController(
                zk, broker_id, config or ControllerConfig(auto_leader_rebalance_enable=False)
            )
            broker.controller.startup()
        self.brokers[broker_id] = broker
        return broker

    def stop_broker(self, broker_id: int) -> None:
        broker = self.brokers.pop(broker_id)
        if broker.controller is not None:
            broker.controller.shutdown()
        broker.zk.close()
        broker.sink.close()

    def active_controller(self) -> KafkaController | None:
        active = [b.controller for b in self.brokers.values() if b.controller is not None and b.controller.is_active]
        return active[0] if len(active) == 1 else None

    def close(self) -> None:
        for broker_id in list(self.brokers):
            self.stop_broker(broker_id)
