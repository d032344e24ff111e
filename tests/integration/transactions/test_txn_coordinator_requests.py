"""The transaction coordinator through raw requests on one real broker: what clients hide (per-version
errors, the state machine's answers, admin filters). One broker for the module; every test uses its
own transactional ids and topics."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from coordination.kafka_zk_client import KafkaZkClient
from protocol.errors import Errors
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import (
    add_offsets,
    add_partitions,
    begin,
    describe,
    end_txn,
    find_coordinator,
    init_producer_id,
    list_transactions,
    unique,
    verify_partitions,
    wait_for_coordinator,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TXN_PARTITIONS = 4
BROKER_OVERRIDES = {"transaction.state.log.num.partitions": str(TXN_PARTITIONS),
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
             "transaction.max.timeout.ms": "300000"}
TERMINAL_ABORT = ("PrepareAbort", "CompleteAbort")


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    wait_for_coordinator(module_broker, "warm-up")  # __transaction_state exists for every test
    return module_broker


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = unique("orders")
    broker.create_topic(name, 2)
    return name


def test_find_coordinator_creates_the_transaction_state_topic_as_kafka_does(broker: BrokerProcess) -> None:
    error, node = find_coordinator(broker, unique("t"))
    assert (error, node) == (Errors.NONE, 0)
    (meta,) = broker.metadata(["__transaction_state"]).topics
    assert meta.is_internal and len(meta.partitions) == TXN_PARTITIONS
    zk = KafkaZkClient.connect(broker.zk_connect, 10000)
    try:
        configs = zk.get_entity_config("topics", "__transaction_state")
    finally:
        zk.close()
    assert configs == {"cleanup.policy": "compact", "compression.type": "uncompressed", "min.insync.replicas": "1",
                       "segment.bytes": "104857600", "unclean.leader.election.enable": "false"}


def test_init_producer_id_bumps_epochs_and_validates(broker: BrokerProcess) -> None:
    txn = unique("t")
    pid, epoch = begin(broker, txn)
    again = init_producer_id(broker, txn)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 1)
    # KIP-360: a producer that still knows its id and epoch bumps it; a retry of that bump gets the same epoch.
    recovered = init_producer_id(broker, txn, producer_id=pid, producer_epoch=epoch + 1)
    retried = init_producer_id(broker, txn, producer_id=pid, producer_epoch=epoch + 1)
    assert (recovered.producer_epoch, retried.producer_epoch) == (epoch + 2, epoch + 2)
    assert init_producer_id(broker, txn, producer_id=pid + 1000, producer_epoch=0).error_code == \
        Errors.PRODUCER_FENCED
    assert init_producer_id(broker, txn, producer_id=pid + 1000, producer_epoch=0, version=3).error_code == \
        Errors.INVALID_PRODUCER_EPOCH  # clients before KIP-588 do not know PRODUCER_FENCED
    assert init_producer_id(broker, txn, producer_id=pid).error_code == Errors.INVALID_REQUEST  # id without epoch
    assert init_producer_id(broker, txn, timeout_ms=0).error_code == Errors.INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(broker, txn, timeout_ms=300001).error_code == Errors.INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(broker, "").error_code == Errors.INVALID_REQUEST
    idempotent = init_producer_id(broker, None, version=0)
    assert (idempotent.error_code, idempotent.producer_epoch) == (0, 0) and idempotent.producer_id != pid


def test_add_partitions_errors(broker: BrokerProcess, topic: str) -> None:
    txn = unique("t")
    pid, epoch = begin(broker, txn)
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0), ("no-such-topic", 0)]) == {
        (topic, 0): Errors.OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(broker, txn, pid, epoch + 1, [(topic, 0)]) == {(topic, 0): Errors.PRODUCER_FENCED}
    assert add_partitions(broker, txn, pid, epoch + 1, [(topic, 0)], version=1) == {
        (topic, 0): Errors.INVALID_PRODUCER_EPOCH}
    assert add_partitions(broker, txn, pid + 1000, epoch, [(topic, 0)]) == {
        (topic, 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(broker, unique("unknown"), pid, epoch, [(topic, 0)]) == {
        (topic, 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0), (topic, 1)]) == {
        (topic, 0): Errors.NONE, (topic, 1): Errors.NONE}
    state = describe(broker, txn)
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Ongoing", epoch)
    assert [(t.topic, sorted(t.partitions)) for t in state.topics] == [(topic, [0, 1])]


def test_add_offsets_adds_the_groups_offsets_partition(broker: BrokerProcess) -> None:
    from broker.coordinator.internal_topic import partition_for

    txn, group = unique("t"), unique("g")
    pid, epoch = begin(broker, txn)
    assert add_offsets(broker, txn, pid, epoch + 1, group) == Errors.PRODUCER_FENCED
    assert add_offsets(broker, txn, pid, epoch + 1, group, version=1) == Errors.INVALID_PRODUCER_EPOCH
    assert add_offsets(broker, txn, pid, epoch, group) == Errors.NONE
    state = describe(broker, txn)
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [
        ("__consumer_offsets", [partition_for(group, 50)])]


def test_verify_only_requests_from_partition_leaders(broker: BrokerProcess, topic: str) -> None:
    txn = unique("t")
    pid, epoch = begin(broker, txn)
    add_partitions(broker, txn, pid, epoch, [(topic, 0)])
    assert verify_partitions(broker, txn, pid, epoch, [(topic, 0), (topic, 1)]) == {
        (topic, 0): Errors.NONE, (topic, 1): Errors.TRANSACTION_ABORTABLE}
    assert verify_partitions(broker, txn, pid, epoch + 1, [(topic, 0)], version=4) == {
        (topic, 0): Errors.PRODUCER_FENCED}
    assert set(add_partitions(broker, txn, pid, epoch, [(topic, 0)]).values()) == {Errors.NONE}


def test_end_txn_state_errors(broker: BrokerProcess, topic: str) -> None:
    txn = unique("t")
    assert end_txn(broker, txn, 1, 0, commit=True) == Errors.INVALID_PRODUCER_ID_MAPPING  # unknown id
    pid, epoch = begin(broker, txn)
    assert end_txn(broker, txn, pid, epoch, commit=True) == Errors.INVALID_TXN_STATE  # nothing started
    add_partitions(broker, txn, pid, epoch, [(topic, 0)])
    assert end_txn(broker, txn, pid + 1000, epoch, commit=True) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(broker, txn, pid, epoch + 1, commit=True) == Errors.PRODUCER_FENCED
    assert end_txn(broker, txn, pid, epoch + 1, commit=True, version=1) == Errors.INVALID_PRODUCER_EPOCH
    assert end_txn(broker, txn, pid, epoch, commit=False) == Errors.NONE
    wait_for(lambda: describe(broker, txn).transaction_state == "CompleteAbort", "the abort to complete")
    assert end_txn(broker, txn, pid, epoch, commit=False) == Errors.NONE  # a retry of the finished abort
    assert end_txn(broker, txn, pid, epoch, commit=True) == Errors.INVALID_TXN_STATE


def test_init_producer_id_fences_an_ongoing_transaction(broker: BrokerProcess, topic: str) -> None:
    txn = unique("t")
    pid, epoch = begin(broker, txn)
    add_partitions(broker, txn, pid, epoch, [(topic, 1)])
    assert init_producer_id(broker, txn).error_code == Errors.CONCURRENT_TRANSACTIONS
    state = describe(broker, txn)
    assert (state.transaction_state in TERMINAL_ABORT, state.producer_epoch) == (True, epoch + 1)
    assert end_txn(broker, txn, pid, epoch, commit=True) == Errors.PRODUCER_FENCED  # the zombie is fenced
    assert end_txn(broker, txn, pid, epoch, commit=True, version=1) == Errors.INVALID_PRODUCER_EPOCH
    # The new producer retries until the abort is complete, and gets the epoch bumped once more.
    assert begin(broker, txn) == (pid, epoch + 2)
    assert describe(broker, txn).transaction_state == "Empty"


def test_transactions_older_than_their_timeout_are_aborted_with_a_new_epoch(broker: BrokerProcess,
                                                                           topic: str) -> None:
    txn, young = unique("t"), unique("t")
    pid, epoch = begin(broker, txn, timeout_ms=1000)
    young_pid, young_epoch = begin(broker, young, timeout_ms=300000)
    add_partitions(broker, txn, pid, epoch, [(topic, 0)])
    add_partitions(broker, young, young_pid, young_epoch, [(topic, 1)])
    aborted = wait_for(lambda: describe(broker, txn).transaction_state == "CompleteAbort" and describe(broker, txn),
                       "the timed-out transaction to be aborted")
    assert aborted.producer_epoch == epoch + 1
    assert describe(broker, young).transaction_state == "Ongoing"
    assert add_partitions(broker, txn, pid, epoch, [(topic, 1)]) == {(topic, 1): Errors.PRODUCER_FENCED}


def test_list_and_describe_with_filters(broker: BrokerProcess, topic: str) -> None:
    ongoing, idle = unique("t"), unique("t")
    pid, epoch = begin(broker, ongoing)
    idle_pid, _ = begin(broker, idle)
    add_partitions(broker, ongoing, pid, epoch, [(topic, 0)])

    def listed(response: object) -> dict[str, tuple[int, str]]:
        assert response.error_code == 0  # type: ignore[attr-defined]
        return {t.transactional_id: (t.producer_id, t.transaction_state)
                for t in response.transaction_states if t.transactional_id in (ongoing, idle)}  # type: ignore[attr-defined]

    assert listed(list_transactions(broker)) == {ongoing: (pid, "Ongoing"), idle: (idle_pid, "Empty")}
    assert listed(list_transactions(broker, states=["Ongoing"])) == {ongoing: (pid, "Ongoing")}
    assert listed(list_transactions(broker, producer_ids=[idle_pid])) == {idle: (idle_pid, "Empty")}
    bogus = list_transactions(broker, states=["Ongoing", "Bogus"], version=0)
    assert list(bogus.unknown_state_filters) == ["Bogus"] and ongoing in listed(bogus)
    time.sleep(0.01)  # the transaction has been open for longer than a 1 ms filter however slow the machine is
    assert ongoing in listed(list_transactions(broker, states=["Ongoing"], duration_ms=1))
    assert listed(list_transactions(broker, states=["Ongoing"], duration_ms=3_600_000)) == {}

    state = describe(broker, ongoing)
    assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch,
            state.transaction_timeout_ms) == (0, "Ongoing", pid, epoch, 60000)
    assert state.transaction_start_time_ms > 0
    missing = describe(broker, unique("missing"))
    assert (missing.error_code, missing.transaction_state) == (Errors.TRANSACTIONAL_ID_NOT_FOUND, "")


def test_broker_keeps_serving_after_bad_transaction_requests(broker: BrokerProcess, topic: str) -> None:
    """Kafka's error codes for nonsense, and the broker still answers a well-formed transaction after."""
    assert end_txn(broker, "", 1, 0, commit=True) == Errors.INVALID_REQUEST
    assert verify_partitions(broker, "", 1, 0, [(topic, 0)]) == {(topic, 0): Errors.INVALID_REQUEST}
    txn = unique("t")
    pid, epoch = begin(broker, txn)
    assert add_partitions(broker, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}


def _logged_values(broker: BrokerProcess, txn: str) -> list[Any]:
    """Every value (None for a tombstone) the coordinator wrote for ``txn``, read back from the segment
    files with TransactionLogKey/Value."""
    from broker.coordinator.internal_topic import partition_for
    from protocol import transaction_log_records as records
    from protocol.records.log_entry import decode_entry_records, iter_log_entries

    directory = broker.log_dir / f"__transaction_state-{partition_for(txn, TXN_PARTITIONS)}"
    values = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for pos, _header in iter_log_entries(data):
            for record in decode_entry_records(data, pos):
                key = records.decode_key(bytes(record.key))
                if key is not None and key.transactional_id == txn:
                    values.append(None if record.value is None else records.decode_value(bytes(record.value)))
    return values


def test_the_coordinator_s_log_decodes_with_kafkas_schemas(broker: BrokerProcess, topic: str) -> None:
    from protocol.transaction_log_records import PartitionsSchema

    txn = unique("t")
    pid, epoch = begin(broker, txn)
    add_partitions(broker, txn, pid, epoch, [(topic, 0), (topic, 1)])
    values = _logged_values(broker, txn)
    assert [(v.version, v.producer_id, v.producer_epoch, v.transaction_status) for v in values] == [
        (0, pid, epoch, 0), (0, pid, epoch, 1)]
    assert values[0].transaction_partitions is None
    assert values[1].transaction_partitions == [PartitionsSchema(topic, [0, 1])]


def test_idle_transactional_ids_expire(zk_connect: str, tmp_path: Path) -> None:
    """transactional.id.expiration.ms: a tombstone, then the id is unknown and starts over."""
    process = BrokerProcess(zk_connect, 0, tmp_path, {
        **BROKER_OVERRIDES, "transactional.id.expiration.ms": "500",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200"})
    with process:
        txn = unique("t")
        wait_for_coordinator(process, txn)
        pid, _epoch = begin(process, txn)
        wait_for(lambda: describe(process, txn).error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND,
                 "the idle transactional id to expire")
        fresh_pid, fresh_epoch = begin(process, txn)
        assert fresh_pid != pid and fresh_epoch == 0
        assert [v if v is None else v.producer_id for v in _logged_values(process, txn)][:3] == [pid, None, fresh_pid]


def _txn_offset_commit(broker: BrokerProcess, txn: str, group: str, producer: tuple[int, int], member: str,
                       generation: int, topic: str, offset: int, version: int = 3) -> Errors:
    from protocol.api_keys import ApiKey
    from protocol.messages import TxnOffsetCommitRequest as T

    request = T(transactional_id=txn, group_id=group, producer_id=producer[0], producer_epoch=producer[1],
                generation_id=generation, member_id=member, group_instance_id=None, topics=[
                    T.TxnOffsetCommitRequestTopic(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                        committed_metadata="")])])
    return Errors(broker.request(ApiKey.TXN_OFFSET_COMMIT, version, request, timeout=15).topics[0]
                  .partitions[0].error_code)


def test_txn_offset_commit_in_the_middle_of_a_rebalance(broker: BrokerProcess, topic: str) -> None:
    """A group in PreparingRebalance (a second member is joining) takes a transactional commit of the
    current generation, refuses another generation or a stranger, and the commit becomes visible with
    the transaction's marker. Every code here is what a Kafka 3.9 broker answered to the same requests."""
    from protocol.api_keys import ApiKey
    from protocol.messages import JoinGroupRequest, OffsetFetchRequest
    from tests.integration.groups.group_helpers import JOIN_VERSION, describe_group, join_group, stable_member
    from tests.integration.groups.group_helpers import wait_for_coordinator as wait_for_group_coordinator

    group, txn = unique("g"), unique("t")
    wait_for_group_coordinator(broker, group)
    member, generation = stable_member(broker, group)
    newcomer = join_group(broker, group).member_id  # MEMBER_ID_REQUIRED, then the join that waits
    with broker.connect() as waiting_join:
        waiting_join.send(ApiKey.JOIN_GROUP, JOIN_VERSION, JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=newcomer,
            group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"x")]))
        wait_for(lambda: describe_group(broker, group).group_state == "PreparingRebalance", "the rebalance")
        producer = begin(broker, txn)
        assert add_offsets(broker, txn, *producer, group) is Errors.NONE
        commit = [_txn_offset_commit(broker, txn, group, producer, member, generation, topic, 7),
                  _txn_offset_commit(broker, txn, group, producer, member, generation + 1, topic, 8),
                  _txn_offset_commit(broker, txn, group, producer, "stranger", generation, topic, 9)]
        assert commit == [Errors.NONE, Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID]
        assert end_txn(broker, txn, *producer, commit=True) is Errors.NONE
        assert describe_group(broker, group).group_state == "PreparingRebalance"  # the rebalance goes on

    def committed() -> int | None:
        answer = broker.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, require_stable=True, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
        (partition,) = answer.topics[0].partitions if not answer.error_code else (None,)
        return partition.committed_offset if partition is not None and not partition.error_code else None

    assert wait_for(committed, "the transactional offset after the commit marker") == 7


def test_bad_transaction_requests_leave_other_clients_alone(broker: BrokerProcess, topic: str) -> None:
    """While a confluent-kafka transactional producer commits, raw requests get Kafka's errors: EndTxn for
    an unknown transactional id, AddPartitionsToTxn with an epoch older than the current one (a fenced
    producer), WriteTxnMarkers for partitions nobody has; the producer loses nothing."""
    import threading

    from confluent_kafka import Producer

    from tests.harness.transactional_copy import read_values
    from tests.integration.transactions.txn_helpers import write_markers

    bystander_topic = unique("bystander")
    broker.create_topic(bystander_topic, 1)
    sent: list[bytes] = []
    failure: list[BaseException] = []

    def bystander() -> None:
        try:
            producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("bystander")})
            producer.init_transactions(30)
            for n in range(20):
                producer.begin_transaction()
                values = [b"%d-%d" % (n, i) for i in range(50)]
                for value in values:
                    producer.produce(bystander_topic, value, partition=0)
                producer.commit_transaction(30)
                sent.extend(values)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=bystander)
    thread.start()
    try:
        txn = unique("t")
        pid, epoch = begin(broker, txn)
        assert begin(broker, txn) == (pid, epoch + 1)  # a second producer with the id: the first is stale
        for _ in range(5):
            assert end_txn(broker, unique("unknown"), pid, epoch, commit=True) is Errors.INVALID_PRODUCER_ID_MAPPING
            assert add_partitions(broker, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.PRODUCER_FENCED}
            assert add_partitions(broker, txn, pid, epoch, [(topic, 0)], version=1) == {
                (topic, 0): Errors.INVALID_PRODUCER_EPOCH}
            missing = unique("missing")
            assert write_markers(broker, pid, True, {topic: [9], missing: [0]}, epoch=epoch) == {
                (topic, 9): Errors.UNKNOWN_TOPIC_OR_PARTITION, (missing, 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    finally:
        thread.join(120)
    assert not failure, failure
    assert read_values(broker.bootstrap, bystander_topic, 1, "read_committed") == {0: sent}
    assert len(sent) == 1000
