"""Transaction coordinator failover on three brokers (__transaction_state RF=3, min.insync.replicas=2).

The commit's PrepareCommit is in the log but its marker cannot be written (the data partition's only
replica is down); the coordinator's broker is then SIGKILLed. The broker that takes over the
__transaction_state partition loads the transaction in PrepareCommit, keeps the client's requests
waiting (CONCURRENT_TRANSACTIONS), and once the data partition is back writes the marker and completes
the commit (its CompleteCommit needs min.insync.replicas, so that append is retried until the restarted
broker is back in the ISR).
"""
from __future__ import annotations


import pytest

from protocol.errors import Errors
from protocol.records.control import ControlRecordType, parse_control_type
from protocol.records.log_entry import decode_entry_records, iter_log_entries
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.replication.replication_support import create_topic, metadata_view
from tests.integration.transactions.txn_helpers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    add_partitions,
    begin,
    describe,
    end_txn,
    fetch,
    find_coordinator,
    init_producer_id,
    produce_transactional,
    unique,
    values,
    wait_for_coordinator,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TXN_PARTITIONS = 3
OVERRIDES = {"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
             "transaction.state.log.num.partitions": str(TXN_PARTITIONS), "replica.lag.time.max.ms": "5000"}



def _txn_partition(txn: str) -> int:
    from broker.coordinator.internal_topic import partition_for

    return partition_for(txn, TXN_PARTITIONS)


def _state(broker: BrokerProcess, txn: str) -> str | None:
    try:
        found = describe(broker, txn)
    except OSError:
        return None
    return found.transaction_state if found.error_code == Errors.NONE else None


@pytest.mark.parametrize("cluster3", [OVERRIDES], indirect=True)
def test_a_new_coordinator_completes_a_commit_prepared_by_a_killed_one(cluster3: BrokerCluster) -> None:
    cluster = cluster3
    brokers = cluster.brokers
    txn, topic = unique("t"), unique("data")
    coordinator = brokers[wait_for_coordinator(brokers[0], txn)]
    # The data partition's broker is not the controller when that can be helped: a dead broker leaves the
    # ISR at once through the controller, but only after replica.lag.time.max.ms when it was the controller.
    controller = brokers[0].metadata().controller_id
    data_leader, survivor = sorted((b for b in brokers if b is not coordinator),
                                   key=lambda b: b.broker_id == controller)
    state_topic = "__transaction_state"
    wait_for(lambda: (v := metadata_view(coordinator, state_topic, _txn_partition(txn))) is not None
             and v.isr == (0, 1, 2), "the transaction's __transaction_state partition to have all replicas in sync")
    create_topic(cluster, topic, [data_leader.broker_id])
    pid, epoch = begin(coordinator, txn)
    assert add_partitions(coordinator, txn, pid, epoch, [(topic, 0)]) == {(topic, 0): Errors.NONE}
    assert produce_transactional(data_leader, txn, pid, epoch, topic, 0, [b"one", b"two"]) is Errors.NONE

    # The data partition's only replica dies: the commit's marker has nowhere to go.
    data_leader.kill()
    data_leader.wait_until_deregistered()
    wait_for(lambda: (v := metadata_view(coordinator, state_topic, _txn_partition(txn))) is not None
             and data_leader.broker_id not in v.isr, "the dead broker to leave the ISR", timeout=60)
    assert end_txn(coordinator, txn, pid, epoch, commit=True) == Errors.NONE  # PrepareCommit is in the log
    assert end_txn(coordinator, txn, pid, epoch, commit=True) == Errors.CONCURRENT_TRANSACTIONS
    # Even an abort: the completion is pending, and Kafka checks that before the state.
    assert end_txn(coordinator, txn, pid, epoch, commit=False) == Errors.CONCURRENT_TRANSACTIONS
    assert init_producer_id(coordinator, txn).error_code == Errors.CONCURRENT_TRANSACTIONS
    state = describe(coordinator, txn)
    assert (state.transaction_state, [(t.topic, list(t.partitions)) for t in state.topics]) == (
        "PrepareCommit", [(topic, [0])])

    # The coordinator dies mid-commit: the survivor takes the partition over and loads the transaction.
    coordinator.kill()
    coordinator.wait_until_deregistered()
    wait_for(lambda: find_coordinator(survivor, txn) == (Errors.NONE, survivor.broker_id),
             "the survivor to coordinate the transaction")
    wait_for(lambda: _state(survivor, txn) == "PrepareCommit", "the survivor to load the prepared commit")
    assert end_txn(survivor, txn, pid, epoch, commit=True) == Errors.CONCURRENT_TRANSACTIONS

    # The data partition comes back: the marker is written and the commit completes (and the
    # transaction's partition may enter the ISR again, for min.insync.replicas).
    data_leader.start()
    wait_for(lambda: _state(survivor, txn) == "CompleteCommit", "the new coordinator to complete the commit",
             timeout=120)
    assert end_txn(survivor, txn, pid, epoch, commit=True) == Errors.NONE  # a retry of the finished commit
    committed = fetch(data_leader, topic, READ_COMMITTED)
    assert [value for _offset, value in values(committed.records)] == [b"one", b"two"]
    buf = bytes(fetch(data_leader, topic, READ_UNCOMMITTED).records)
    markers = [(parse_control_type(r.key), header.producer_id) for pos, header in iter_log_entries(buf)
               if header.is_control for r in decode_entry_records(buf, pos)]
    assert markers == [(ControlRecordType.COMMIT, pid)]  # once: the killed coordinator never reached the partition
    again = init_producer_id(survivor, txn)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 1)
