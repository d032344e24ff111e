"""Stand-ins at the transaction coordinator's boundaries: the replica manager (appends go to real
storage logs in a temp dir), the metadata cache (partition leaders) and the WriteTxnMarkers channel."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from broker.coordinator.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC, TransactionConfig
from protocol import transaction_log_records as records
from protocol.errors import Errors, KafkaApiError
from protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from storage.log import Log
from storage.log_config import LogConfig
from tests.harness.waiting import wait_until

TopicPartition = tuple[str, int]


@dataclass
class FakePartition:
    log: Log


class FakeReplicaManager:
    """Appends to real logs (one per partition, created on first use); can fail appends."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.partitions: dict[TopicPartition, FakePartition] = {}
        self.fail_with: Errors | None = None

    def partition_log(self, topic: str, partition: int) -> Log:
        found = self.partitions.get((topic, partition))
        if found is None:
            found = self.partitions[(topic, partition)] = FakePartition(
                Log(str(self.base / f"{topic}-{partition}"), LogConfig()))
        return found.log

    async def append_and_wait(self, topic: str, partition: int, batch: bytearray, timeout_ms: int) -> None:
        if self.fail_with is not None:
            raise KafkaApiError(self.fail_with)
        self.partition_log(topic, partition).append_as_leader(batch, 0)

    def get_partition(self, topic: str, partition: int) -> FakePartition | None:
        return self.partitions.get((topic, partition))

    def txn_log_records(self, partition: int = 0) -> list[tuple[str, records.TransactionLogValue | None]]:
        """Every (transactional id, value or None for a tombstone) appended to __transaction_state-<partition>."""
        tp_log = self.partition_log(TRANSACTION_STATE_TOPIC, partition)
        data = tp_log.read(0, 1 << 20, max_offset=tp_log.log_end_offset).records
        buf = data.read_bytes() if len(data) else b""
        out = []
        for pos, _header in iter_log_entries(buf):
            for record in decode_entry_records(buf, pos):
                key = records.decode_key(bytes(record.key))
                assert key is not None
                out.append((key.transactional_id,
                            None if record.value is None else records.decode_value(bytes(record.value))))
        return out

    def close(self) -> None:
        for partition in self.partitions.values():
            partition.log.close()


@dataclass
class FakePartitionState:
    leader: int


class FakeMetadataCache:
    """Topics with leaders; brokers alive with an endpoint unless removed."""

    def __init__(self) -> None:
        self.leaders: dict[TopicPartition, int] = {}
        self.alive: set[int] = {0, 1, 2}

    def partition(self, topic: str, partition: int) -> FakePartitionState | None:
        leader = self.leaders.get((topic, partition))
        return None if leader is None else FakePartitionState(leader)

    def topic_partitions(self, topic: str) -> dict[int, Any]:
        return {p: FakePartitionState(leader) for (t, p), leader in self.leaders.items() if t == topic}

    def broker_endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        return ("127.0.0.1", 9000 + broker_id) if broker_id in self.alive else None


MarkerAnswer = Callable[[int, TopicPartition], Errors]


class FakeMarkerSender:
    """The WriteTxnMarkers channel: records each request per broker and answers through ``answer``
    (NONE by default); ``down`` brokers fail like a closed connection."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, WriteTxnMarkersRequest]] = []
        self.answer: MarkerAnswer = lambda broker, tp: Errors.NONE
        self.down: set[int] = set()
        self.sent = asyncio.Event()

    async def __call__(self, broker: int, endpoint: tuple[str, int], request: WriteTxnMarkersRequest) -> Any:
        self.requests.append((broker, request))
        self.sent.set()
        if broker in self.down:
            raise ConnectionRefusedError(f"broker {broker} is down")
        return WriteTxnMarkersResponse(markers=[WriteTxnMarkersResponse.WritableTxnMarkerResult(
            producer_id=m.producer_id, topics=[WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                name=t.name, partitions=[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=int(self.answer(broker, (t.name, p))))
                    for p in t.partition_indexes]) for t in m.topics]) for m in request.markers])

    def markers(self) -> list[tuple[int, int, int, bool, int, list[TopicPartition]]]:
        """(broker, producer id, epoch, commit, coordinator epoch, partitions) of every marker sent."""
        return [(broker, m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                 [(t.name, p) for t in m.topics for p in t.partition_indexes])
                for broker, request in self.requests for m in request.markers]


class Harness:
    """A started coordinator owning __transaction_state-0 (a single partition) at coordinator epoch 5."""

    COORDINATOR_EPOCH = 5

    def __init__(self, base: Path, **config: Any) -> None:
        settings: dict[str, Any] = {"transaction_log_num_partitions": 1,
                                    "abort_timed_out_transactions_interval_ms": 3_600_000}
        settings.update(config)
        self.replicas = FakeReplicaManager(base)
        self.cache = FakeMetadataCache()
        self.cache.leaders[(TRANSACTION_STATE_TOPIC, 0)] = 0
        self.sender = FakeMarkerSender()
        self.next_producer_id = 1000
        txn_config = TransactionConfig(**settings)

        async def run_blocking(fn: Any, *args: Any) -> Any:
            return fn(*args)

        async def generate() -> int:
            self.next_producer_id += 1
            return self.next_producer_id

        self.coordinator = TransactionCoordinator(0, txn_config, self.replicas, self.cache,  # type: ignore[arg-type]
                                                  run_blocking, generate, "PLAINTEXT", marker_sender=self.sender)
        self.coordinator.marker_channel.retry_backoff_s = 0.001  # retries in a unit test need not wait

    async def start(self) -> None:
        self.replicas.partition_log(TRANSACTION_STATE_TOPIC, 0)
        self.coordinator.startup(enable_transactional_id_expiration=False)
        await self.elect()

    async def elect(self, epoch: int = COORDINATOR_EPOCH) -> None:
        self.coordinator.on_leadership_change(TRANSACTION_STATE_TOPIC, 0, True, epoch)
        await self.until(lambda: not self.coordinator.state_manager.loading_partitions)

    async def until(self, condition: Callable[[], bool]) -> None:
        await wait_until(condition, interval=0.001)

    def metadata(self, transactional_id: str) -> Any:
        found = self.coordinator.state_manager.get_transaction_state(transactional_id)
        assert found is not None
        return found.transaction_metadata

    async def stop(self) -> None:
        await self.coordinator.shutdown()
        self.replicas.close()
