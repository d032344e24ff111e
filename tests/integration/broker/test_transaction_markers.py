"""The partition side of transactions on a real broker, with raw requests: transactional batches,
WriteTxnMarkers from a (pretend) transaction coordinator, the LSO read_committed Fetch and ListOffsets
see, aborted transactions in Fetch and in the .txnindex on disk, Kafka's marker errors, and the
produce checks of transactional batches. Verification with the coordinator (KIP-890) is off here:
no transaction coordinator runs in these tests (tests/unit/broker covers the verification path)."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC
from broker.coordinator.internal_topic import partition_for
from protocol.messages import DescribeProducersRequest, JoinGroupRequest, OffsetFetchRequest, TxnOffsetCommitRequest
from storage.transaction_index import AbortedTxn
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import wait_for_coordinator
from tests.integration.transactions.txn_helpers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    aborted,
    fetch,
    idempotent_producer_id,
    latest_offset,
    produce,
    txn_batch,
    txn_index_entries,
    values,
    write_markers,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OFFSETS_PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(shared_zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:  # type: ignore[no-untyped-def]
    zk = shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}")
    process = BrokerProcess(zk, 0, tmp_path_factory.mktemp("txn-markers"),
                            {"transaction.partition.verification.enable": "false",
                             "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    topic = f"txn-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, partitions)
    return topic


def test_commit_and_abort_markers_move_the_lso_and_fill_the_txn_index(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    committer, aborter, still_open = (idempotent_producer_id(broker) for _ in range(3))
    assert produce(broker, topic, txn_batch([b"c0", b"c1"], committer, 0)).error_code == 0  # 0-1
    assert produce(broker, topic, txn_batch([b"a0"], aborter, 0)).error_code == 0  # 2
    assert fetch(broker, topic, READ_COMMITTED).last_stable_offset == 0
    assert latest_offset(broker, topic, READ_COMMITTED) == 0
    assert latest_offset(broker, topic, READ_UNCOMMITTED) == 3

    assert write_markers(broker, committer, True, {topic: [0]}) == {(topic, 0): 0}  # 3
    assert latest_offset(broker, topic, READ_COMMITTED) == 2  # the aborter's transaction still holds the LSO
    assert write_markers(broker, aborter, False, {topic: [0]}) == {(topic, 0): 0}  # 4
    assert produce(broker, topic, txn_batch([b"o0"], still_open, 0)).error_code == 0  # 5

    committed = fetch(broker, topic, READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 5)
    assert [v for _, v in values(committed.records)] == [b"c0", b"c1", b"a0"]  # the consumer drops the abort
    assert aborted(committed) == [(aborter, 2)]
    assert latest_offset(broker, topic, READ_COMMITTED) == 5
    uncommitted = fetch(broker, topic, READ_UNCOMMITTED)
    assert [v for _, v in values(uncommitted.records)] == [b"c0", b"c1", b"a0", b"o0"]
    assert aborted(uncommitted) is None  # Kafka sends aborted transactions only to read_committed
    assert aborted(fetch(broker, topic, READ_COMMITTED, offset=4)) == [(aborter, 2)]  # its marker is fetched
    assert aborted(fetch(broker, topic, READ_COMMITTED, offset=5)) == []
    assert txn_index_entries(broker, topic) == [AbortedTxn(aborter, 2, 4, 5)]

    (producers,) = broker.request(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])])).topics[0].partitions
    open_txns = {p.producer_id: p.current_txn_start_offset for p in producers.active_producers}
    assert open_txns == {committer: -1, aborter: -1, still_open: 5}
    assert write_markers(broker, still_open, True, {topic: [0]}) == {(topic, 0): 0}
    assert latest_offset(broker, topic, READ_COMMITTED) == 7


def test_marker_errors(broker: BrokerProcess) -> None:
    topic = _topic(broker, partitions=2)
    pid = idempotent_producer_id(broker)
    assert produce(broker, topic, txn_batch([b"x"], pid, 0, epoch=3)).error_code == 0
    assert write_markers(broker, pid, True, {topic: [0]}, epoch=3, coordinator_epoch=7) == {(topic, 0): 0}
    stale = write_markers(broker, pid, True, {topic: [0, 1]}, epoch=3, coordinator_epoch=6)
    assert stale[(topic, 0)] == Errors.TRANSACTION_COORDINATOR_FENCED
    assert stale[(topic, 1)] == 0  # a partition the stale coordinator never wrote to has no epoch to compare
    older = write_markers(broker, pid, False, {topic: [0]}, epoch=2, coordinator_epoch=7)
    assert older == {(topic, 0): Errors.INVALID_PRODUCER_EPOCH}
    unknown = write_markers(broker, pid, False, {topic: [5], "no-such-topic": [0]}, epoch=3, coordinator_epoch=7)
    assert unknown == {(topic, 5): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                       ("no-such-topic", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert latest_offset(broker, topic, READ_COMMITTED) == 2  # the data batch and the one good marker


def test_produce_checks_of_transactional_batches(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    pid = idempotent_producer_id(broker)
    without_id = produce(broker, topic, txn_batch([b"x"], pid, 0), transactional_id=None)
    assert without_id.error_code == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(broker, topic, txn_batch([b"x"], pid, 0)).error_code == 0
    plain = produce(broker, topic, _plain_batch(pid, 1))
    assert plain.error_code == Errors.INVALID_TXN_STATE  # a non-transactional write inside the transaction


def _plain_batch(pid: int, sequence: int) -> bytearray:
    from protocol.records.builder import RecordBatchBuilder

    builder = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=sequence)
    builder.append(int(time.time() * 1000), b"k", b"plain")
    return builder.build()


def test_txn_index_and_lso_survive_a_restart(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    first, second = idempotent_producer_id(broker), idempotent_producer_id(broker)
    produce(broker, topic, txn_batch([b"a"], first, 0))
    produce(broker, topic, txn_batch([b"b"], second, 0))
    write_markers(broker, first, False, {topic: [0]})
    broker.stop()
    broker.start()
    broker.wait_for_leaders(topic, 1)
    committed = fetch(broker, topic, READ_COMMITTED)
    assert committed.last_stable_offset == 1 and aborted(committed) == [(first, 0)]
    assert write_markers(broker, second, True, {topic: [0]}) == {(topic, 0): 0}
    assert latest_offset(broker, topic, READ_COMMITTED) == 4


# --- transactional offset commits ----------------------------------------------------------------

def _txn_commit(broker: BrokerProcess, group: str, pid: int, offsets: dict[tuple[str, int], int], version: int = 3,
                member_id: str = "", generation: int = -1, epoch: int = 0) -> dict[tuple[str, int], int]:
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m"))
    request = TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=epoch,
                                     generation_id=generation, member_id=member_id, group_instance_id=None,
                                     topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                                             for t, ps in topics.items()])
    answer = broker.request(ApiKey.TXN_OFFSET_COMMIT, version, request, timeout=15.0)
    return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def _committed(broker: BrokerProcess, group: str, topic: str, require_stable: bool = False) -> tuple[int, int]:
    """(offset, error) of partition 0 as OffsetFetch v7 answers; (-1, the group's error) if it has one."""
    request = OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
    answer = broker.request(ApiKey.OFFSET_FETCH, 7, request)
    if answer.error_code:
        return -1, answer.error_code
    (partition,) = answer.topics[0].partitions
    return partition.committed_offset, partition.error_code


def _offsets_partition(group: str) -> dict[str, list[int]]:
    return {GROUP_METADATA_TOPIC: [partition_for(group, OFFSETS_PARTITIONS)]}


def test_txn_offsets_are_pending_until_the_marker_and_reloaded_pending(broker: BrokerProcess) -> None:
    topic, group = _topic(broker), f"g-{uuid.uuid4().hex[:8]}"
    wait_for_coordinator(broker, group)
    pid = idempotent_producer_id(broker)
    assert _txn_commit(broker, group, pid, {(topic, 0): 5, (topic, 7): 1}) == {
        (topic, 0): 0, (topic, 7): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert _committed(broker, group, topic, require_stable=True) == (-1, Errors.UNSTABLE_OFFSET_COMMIT)
    assert _committed(broker, group, topic) == (-1, 0)
    assert write_markers(broker, pid, True, _offsets_partition(group)) == {
        (GROUP_METADATA_TOPIC, partition_for(group, OFFSETS_PARTITIONS)): 0}
    assert _committed(broker, group, topic, require_stable=True) == (5, 0)

    assert _txn_commit(broker, group, pid, {(topic, 0): 9}) == {(topic, 0): 0}
    write_markers(broker, pid, False, _offsets_partition(group))
    assert _committed(broker, group, topic, require_stable=True) == (5, 0)  # the abort dropped 9

    assert _txn_commit(broker, group, pid, {(topic, 0): 12}) == {(topic, 0): 0}
    broker.stop()
    broker.start()  # the group is loaded again from __consumer_offsets: 12 is still pending
    wait_for_coordinator(broker, group)  # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until then
    wait_for(lambda: _committed(broker, group, topic, require_stable=True) == (-1, Errors.UNSTABLE_OFFSET_COMMIT),
             "the pending transactional offset reloaded", 30)
    assert _committed(broker, group, topic) == (5, 0)
    write_markers(broker, pid, True, _offsets_partition(group))
    assert _committed(broker, group, topic, require_stable=True) == (12, 0)


def test_txn_offset_commit_checks_the_group_and_its_member(broker: BrokerProcess) -> None:
    topic, group = _topic(broker), f"g-{uuid.uuid4().hex[:8]}"
    wait_for_coordinator(broker, group)
    pid = idempotent_producer_id(broker)
    assert _txn_commit(broker, "", pid, {(topic, 0): 1}) == {(topic, 0): Errors.INVALID_GROUP_ID}
    joined = broker.request(ApiKey.JOIN_GROUP, 3, JoinGroupRequest(
        group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="", protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), timeout=15.0)
    assert joined.error_code == 0 and joined.generation_id == 1
    # the group waits for SyncGroup (CompletingRebalance): a member of the current generation may still commit
    assert _txn_commit(broker, group, pid, {(topic, 0): 3}, member_id=joined.member_id, generation=1) == {(topic, 0): 0}
    assert _txn_commit(broker, group, pid, {(topic, 0): 4}, member_id=joined.member_id, generation=0) == {
        (topic, 0): Errors.ILLEGAL_GENERATION}
    assert _txn_commit(broker, group, pid, {(topic, 0): 4}, member_id="someone-else", generation=1) == {
        (topic, 0): Errors.UNKNOWN_MEMBER_ID}
    assert _txn_commit(broker, group, pid, {(topic, 0): 4}, version=2) == {(topic, 0): 0}  # v2: no member checks
