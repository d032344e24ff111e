"""ShareCoordinator's loads of ``__share_group_state`` partitions across leadership changes."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator
from protocol.errors import Errors, KafkaApiError


class _Partition:
    log = object()


class _ReplicaManager:
    def get_partition(self, _topic: str, _partition: int) -> _Partition:
        return _Partition()


def test_a_failed_load_of_an_older_epoch_leaves_the_newer_load_to_finish() -> None:
    """Leader at epoch 1, follower, leader at epoch 2 while the first load still reads: the first
    load failing (its log truncated under it) must not cancel the second, which installs the shard;
    before, the partition was then neither loading nor loaded, NOT_COORDINATOR until the next
    election, and no share-partition whose state lives there could start."""
    async def run() -> None:
        replays: dict[int, asyncio.Future[None]] = {}

        async def run_blocking(_function: Any, *_args: Any) -> None:
            epoch = len(replays) + 1
            replays[epoch] = asyncio.get_running_loop().create_future()
            await replays[epoch]

        coordinator = ShareCoordinator(_ReplicaManager(), run_blocking,  # type: ignore[arg-type]
                                       lambda: 1, snapshot_every=100, write_timeout_ms=1000)
        key = ("group", uuid.uuid4(), 0)
        coordinator.on_leadership_change(SHARE_GROUP_STATE_TOPIC, 0, True, 1)
        await asyncio.sleep(0)
        coordinator.on_leadership_change(SHARE_GROUP_STATE_TOPIC, 0, False, 1)
        coordinator.on_leadership_change(SHARE_GROUP_STATE_TOPIC, 0, True, 2)
        await asyncio.sleep(0)
        replays[1].set_exception(OSError("log truncated while replaying"))
        await asyncio.sleep(0)
        with pytest.raises(KafkaApiError) as loading:
            coordinator.read(key)
        assert loading.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        replays[2].set_result(None)
        await asyncio.sleep(0)
        assert coordinator.read(key) is None  # loaded, nothing stored for it
        assert 0 in coordinator.shards and not coordinator.loading

    asyncio.run(run())
