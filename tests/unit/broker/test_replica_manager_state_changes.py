"""LeaderAndIsr requests apply one at a time (Kafka's replicaStateChangeLock), whatever their connections."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from protocol.messages import LeaderAndIsrRequest
from storage.log_manager import LogManager

TOPIC_ID = uuid.uuid4()


def _request(leader: int, leader_epoch: int) -> Any:
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=1, leader=leader, leader_epoch=leader_epoch, isr=[0, 1],
        partition_epoch=leader_epoch, replicas=[0, 1], is_new=True)
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=1, topic_states=[
        LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", topic_id=TOPIC_ID, partition_states=[state])])


def test_an_older_request_still_opening_its_log_cannot_override_a_newer_one(tmp_path: Path) -> None:
    """Epoch 0 (lead) arrives first and is slow to open the log; epoch 1 (follow broker 1) arrives
    meanwhile. The newer epoch must be the one in force at the end."""
    log_manager = LogManager([str(tmp_path)])
    first_open = asyncio.Event()

    async def run_blocking(fn: Any, *args: Any) -> Any:
        if fn.__name__ == "open_log" and not first_open.is_set():
            first_open.set()
            await asyncio.sleep(0.2)  # the first request's log opening takes a while
        return fn(*args)

    async def run() -> ReplicaManager:
        manager = ReplicaManager(0, log_manager, MetadataCache(0), run_blocking)
        older = asyncio.ensure_future(manager.become_leader_or_follower(_request(0, 0), 5, lambda _t: {}))
        await first_open.wait()
        newer = asyncio.ensure_future(manager.become_leader_or_follower(_request(1, 1), 5, lambda _t: {}))
        await asyncio.gather(older, newer)
        return manager

    manager = asyncio.run(run())
    partition = manager.partitions[("t", 0)]
    assert (partition.leader_epoch, partition.leader_id, partition.is_leader) == (1, 1, False)
    log_manager.shutdown()
