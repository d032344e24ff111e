"""The AlterPartition requests a leader sends: what a Kafka 3.9 broker sends, at the version it uses."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace

from broker.partition import Partition
from broker.replication.alter_partition_manager import AlterPartitionManager
from protocol.api_keys import ApiKey
from protocol.framing import decode_request, encode_request
from tests.harness.waiting import wait_until
from tests.unit.storage.storage_test_helpers import open_log


def _leader(tmp_path: Path, topic_id: uuid.UUID | None) -> Partition:
    partition = Partition("t", 0, broker_id=0)
    partition.make_leader(SimpleNamespace(leader=0, leader_epoch=2, isr=[0, 1], replicas=[0, 1, 2],
                                          partition_epoch=7, controller_epoch=1), open_log(tmp_path / "t-0"))
    partition.topic_id = topic_id
    partition.pending_isr = [0, 1, 2]
    return partition


def _manager() -> AlterPartitionManager:
    return AlterPartitionManager(0, lambda: 25, SimpleNamespace(), "PLAINTEXT", 30.0, lambda p, previous: None)


def test_by_topic_id_with_unknown_broker_epochs_at_v3(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    request = _manager()._request({("t", 0): _leader(tmp_path, topic_id)}, by_id=True)
    _, decoded = decode_request(encode_request(request, ApiKey.ALTER_PARTITION, 3, 1, "0")[4:])
    assert (decoded.broker_id, decoded.broker_epoch) == (0, 25)
    (topic,) = decoded.topics
    assert topic.topic_id == topic_id
    (partition,) = topic.partitions
    assert [(b.broker_id, b.broker_epoch) for b in partition.new_isr_with_epochs] == [(0, -1), (1, -1), (2, -1)]
    assert (partition.leader_epoch, partition.partition_epoch) == (2, 7)


def test_by_name_at_v1_while_the_topic_id_is_unknown(tmp_path: Path) -> None:
    request = _manager()._request({("t", 0): _leader(tmp_path, None)}, by_id=False)
    _, decoded = decode_request(encode_request(request, ApiKey.ALTER_PARTITION, 1, 1, "0")[4:])
    assert decoded.topics[0].topic_name == "t"
    assert list(decoded.topics[0].partitions[0].new_isr) == [0, 1, 2]


def test_the_sender_outlives_an_unexpected_error(tmp_path: Path) -> None:
    """An answer the sender cannot handle leaves no proposal pending, and the next one is sent."""
    asyncio.run(_sender_outlives_an_unexpected_error(tmp_path))


async def _sender_outlives_an_unexpected_error(tmp_path: Path) -> None:
    manager = _manager()
    sent: list[list[int]] = []

    async def send(batch: dict) -> None:
        sent.append(list(next(iter(batch.values())).pending_isr))
        if len(sent) == 1:
            raise KeyError("an unexpected answer")
        next(iter(batch.values())).pending_isr = None

    manager._send = send  # type: ignore[method-assign]
    manager.start()
    try:
        partition = _leader(tmp_path, uuid.uuid4())
        partition.pending_isr = None
        manager.submit(partition, [0, 1, 2])
        await wait_until(lambda: sent and partition.pending_isr is None, "the retried ISR change answered")
        manager.submit(partition, [0, 1])
        await wait_until(lambda: len(sent) == 2, "the second ISR change sent")
        assert sent == [[0, 1, 2], [0, 1]]
    finally:
        await manager.shutdown()

