"""Broker-side fencing of controller requests (what Kafka's ReplicaManager and MetadataCache do):
LeaderAndIsr, UpdateMetadata and StopReplica from a controller with an older epoch than the newest
one seen are rejected with STALE_CONTROLLER_EPOCH, so a deposed controller can't change a broker."""
from __future__ import annotations

import threading

from coordination.errors import CoordinationError


class StaleControllerEpochError(CoordinationError):
    kafka_error = "STALE_CONTROLLER_EPOCH"


class ControllerEpochFence:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.controller_epoch = 0
        self.controller_id = -1

    def check_and_update(self, controller_id: int, controller_epoch: int) -> None:
        """Accept a request from (controller_id, controller_epoch) or raise StaleControllerEpochError."""
        with self._lock:
            if controller_epoch < self.controller_epoch:
                raise StaleControllerEpochError(
                    f"Received a request from controller {controller_id} with epoch {controller_epoch}, "
                    f"older than the current controller epoch {self.controller_epoch} "
                    f"(controller {self.controller_id})"
                )
            self.controller_epoch = controller_epoch
            self.controller_id = controller_id
