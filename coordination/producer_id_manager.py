"""Cluster-unique producer ids (Kafka's ProducerIdManager): blocks of 1000 ids are claimed from
/latest_producer_id_block with a conditional update, so two claimers can never get the same block,
and each broker hands out ids from its current block."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from coordination.errors import ProducerIdsExhaustedError, ZooKeeperUnavailableError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import ProducerIdBlock
from coordination.zk_admin_data import PRODUCER_ID_BLOCK_SIZE

log = logging.getLogger(__name__)

MAX_PRODUCER_ID = (1 << 63) - 1


def allocate_producer_id_block(zk_client: KafkaZkClient, broker_id: int) -> ProducerIdBlock:
    """Claim the next block for `broker_id` (the controller's AllocateProducerIds work; also what
    brokers of old IBPs did themselves). Retries when another claimer won the race. Without a
    ZooKeeper connection it fails at once rather than waiting for one: a client asking for a producer
    id then gets Kafka's immediate retriable answer, not one a connection timeout later."""
    if not zk_client.zk.connected:
        raise ZooKeeperUnavailableError("ZooKeeper is not connected: no producer id block can be claimed now")
    while True:
        current, version = zk_client.get_producer_id_block()
        first = 0 if current is None else current.next_block_first_id
        if first > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
            raise ProducerIdsExhaustedError("Exhausted all producerIds as the next block's end producerId would exceed the int64 range")
        block = ProducerIdBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
        if zk_client.conditional_set_producer_id_block(block, version):
            log.info("allocated producer id block %s", block)
            return block
        log.debug("lost the race for producer id block starting at %d; retrying", first)


class ProducerIdManager:
    """Hands out producer ids from blocks obtained by `fetch_block` (a ZooKeeper claim, or an
    AllocateProducerIds request to the controller)."""

    def __init__(self, fetch_block: Callable[[], ProducerIdBlock]) -> None:
        self._fetch_block = fetch_block
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next_id = 0

    def generate_producer_id(self) -> int:
        with self._lock:
            if self._block is None or self._next_id > self._block.last_producer_id:
                self._block = self._fetch_block()
                self._next_id = self._block.first_producer_id
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
