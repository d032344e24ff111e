"""DelayedProduce: an acks=all produce waiting until the ISR has every appended batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.delayed_operation import DelayedOperation
from protocol.errors import Errors

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]


class DelayedProduce(DelayedOperation):
    """``pending`` maps each appended partition to the offset the high watermark must reach and
    its response entry; ``respond`` sends the response once all are settled or time is up."""

    def __init__(self, delay_ms: int, replica_manager: ReplicaManager,
                 pending: dict[TopicPartition, tuple[int, Any]], respond: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self.replica_manager = replica_manager
        self.pending = dict(pending)
        self.respond = respond

    def try_complete(self) -> bool:
        for tp, (required_offset, entry) in list(self.pending.items()):
            partition = self.replica_manager.get_partition(*tp)
            if partition is None:
                done, error = True, Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                done, error = partition.check_enough_replicas_reach_offset(required_offset)
            if done:
                entry.error_code = int(error)
                if error != Errors.NONE:
                    entry.base_offset = -1
                del self.pending[tp]
        if not self.pending:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        for _, entry in self.pending.values():
            entry.error_code = int(Errors.REQUEST_TIMED_OUT)
            entry.base_offset = -1
        self.respond()
