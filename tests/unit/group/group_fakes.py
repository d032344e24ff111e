"""In-memory stand-ins for the replica manager and metadata cache the group coordinator uses."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from broker.coordinator.group.group_coordinator import GroupCoordinator
from broker.coordinator.group.group_metadata_manager import GroupConfig
from protocol.errors import Errors, KafkaApiError


class FakeReplicaManager:
    """Records what would have been appended to __consumer_offsets; can fail appends."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.fail_with: Errors | None = None

    async def append_and_wait(self, topic: str, partition: int, records: bytearray, timeout_ms: int,
                              *_origin_and_guard: Any) -> Any:
        if self.fail_with is not None:
            raise KafkaApiError(self.fail_with)
        self.batches.append(bytes(records))
        return SimpleNamespace(first_offset=len(self.batches) - 1)  # one record batch per offset, for ordering

    async def append_to_leader(self, topic: str, partition: int, records: bytearray, acks: int, *_origin: Any) -> None:
        self.batches.append(bytes(records))

    def get_partition(self, topic: str, partition: int) -> Any:
        return None


class FakeMetadataCache:
    def topic_partitions(self, topic: str) -> dict[int, Any]:
        return {}


def coordinator(**overrides: Any) -> tuple[GroupCoordinator, FakeReplicaManager]:
    """An active coordinator owning the only offsets partition (unit tests run it on asyncio.run)."""
    settings: dict[str, Any] = {"offsets_topic_num_partitions": 1, "min_session_timeout_ms": 10,
                                "initial_rebalance_delay_ms": 0, "offsets_retention_check_interval_ms": 3_600_000}
    settings.update(overrides)
    replica_manager = FakeReplicaManager()

    async def run_blocking(fn: Any, *args: Any) -> Any:
        return fn(*args)

    created = GroupCoordinator(0, GroupConfig(**settings), replica_manager, FakeMetadataCache(),  # type: ignore[arg-type]
                               run_blocking)
    created.manager.owned_partitions.add(0)
    created.startup()
    return created, replica_manager
