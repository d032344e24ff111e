"""Exactly-once on three brokers (RF=3, min.insync.replicas=2 for the data topics, __transaction_state
and __consumer_offsets), the way a Kafka Streams or Flink job relies on it.

A librdkafka consume-transform-produce loop (``TransactionalCopier``: read_committed consumer,
transactional producer, offsets sent to each transaction, paced to last about 40 s) copies 100,000
records from one topic to another while the broker coordinating its transactional id is SIGKILLed and
restarted, and then the broker leading an output partition. Then another producer opens a transaction
on every output partition, writes, and is SIGKILLed: its transaction holds the output's last stable offset until the
coordinator aborts it on its timeout (3 s), and read_committed consumers then go on. Afterwards the
output read with read_committed holds every input record exactly once, in input order per
partition, and nothing of the killed producer.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid

import confluent_kafka
import pytest

from protocol.errors import Errors
from tests.harness.broker import BrokerCluster, BrokerProcess
from tests.harness.processes import die_with_parent
from tests.harness.transactional_copy import TransactionalCopier, read_values, stable_end_offsets, watermarks
from tests.harness.waiting import wait_for
from tests.integration.transactions.txn_helpers import describe, find_coordinator

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS = 100_000
PARTITIONS = 3
ABANDONED_TIMEOUT_MS = 3000
COPY_RATE = 2500  # records/s: the copy lasts long enough for both kills and restarts to land in its middle
OVERRIDES = {
    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3", "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3", "min.insync.replicas": "2", "replica.lag.time.max.ms": "5000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
INTERNAL = ("__transaction_state", "__consumer_offsets")

# A transactional producer that writes to every output partition, says so, and waits to be killed.
PRODUCE_AND_HANG = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, transactional_id, topic, partitions, timeout_ms = sys.argv[1:6]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": int(timeout_ms)})
    producer.init_transactions(60)
    producer.begin_transaction()
    for partition in range(int(partitions)):
        producer.produce(topic, b"left-open", partition=partition)
    producer.flush(60)
    print("produced", flush=True)
    time.sleep(600)
""")



def _live(cluster: BrokerCluster) -> BrokerProcess:
    return next(b for b in cluster.brokers if b.process is not None)


def _leader(cluster: BrokerCluster, topic: str, partition: int) -> int:
    def find() -> int | None:
        (meta,) = _live(cluster).metadata([topic]).topics
        leader = next(p.leader_id for p in meta.partitions if p.partition_index == partition)
        return leader + 1 if leader >= 0 else None  # +1: broker 0 is falsy

    return wait_for(find, f"a leader for {topic}-{partition}") - 1


def _coordinator(cluster: BrokerCluster, transactional_id: str) -> int:
    def find() -> int | None:
        error, node = find_coordinator(_live(cluster), transactional_id)
        return node + 1 if error is Errors.NONE else None

    return wait_for(find, f"the coordinator of {transactional_id}", 60) - 1


def _all_in_sync(cluster: BrokerCluster, topics: tuple[str, ...]) -> bool:
    return all(len(p.isr_nodes) == 3 for t in _live(cluster).metadata(list(topics)).topics for p in t.partitions)


def _kill_and_restart(cluster: BrokerCluster, broker_id: int, topics: tuple[str, ...]) -> None:
    """SIGKILL, wait for ZooKeeper to notice, start again, and wait until every replica is in sync."""
    victim = cluster.brokers[broker_id]
    victim.kill()
    victim.wait_until_deregistered()
    victim.start()
    wait_for(lambda: _all_in_sync(cluster, topics), f"broker {broker_id} back in every ISR", 90)


def _fill(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """RECORDS numbered values, round-robin over the partitions; what each partition got, in order."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "linger.ms": 20, "batch.num.messages": 10000})
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for n in range(RECORDS):
        value = b"%06d" % n
        while True:
            try:
                producer.produce(topic, value, partition=n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        sent[n % PARTITIONS].append(value)
    assert producer.flush(120) == 0
    return sent


@pytest.mark.parametrize("cluster3", [OVERRIDES], indirect=True)
def test_exactly_once_copy_through_coordinator_and_leader_kills(cluster3: BrokerCluster) -> None:
    cluster = cluster3
    suffix = uuid.uuid4().hex[:8]
    source, output, txn = f"eos-in-{suffix}", f"eos-out-{suffix}", f"eos-copier-{suffix}"
    for topic in (source, output):
        cluster.brokers[0].create_topic(topic, PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"})
    topics = (source, output, *INTERNAL)
    sent = _fill(cluster.bootstrap, source)
    ends = {p: len(values) for p, values in sent.items()}

    copier = TransactionalCopier(cluster.bootstrap, source, output, f"eos-group-{suffix}", txn, batch=1000,
                                 rate=COPY_RATE)
    copier.start()
    hanging: subprocess.Popen[str] | None = None
    try:
        def progress(fraction: float) -> None:
            if fraction < 1:  # the source offsets count records: no control batches there
                wait_for(lambda: copier.copied_up_to({}) and sum(copier.committed_offsets.values()) >= RECORDS * fraction,
                         f"{fraction:.0%} copied", 120)
            else:
                wait_for(lambda: copier.copied_up_to(ends), "everything copied", 120)

        def kill_and_restart(broker_id: int, role: str) -> None:
            copied = sum(copier.committed_offsets.values())
            assert copied < RECORDS, f"the copy was over before the {role} was killed"
            _kill_and_restart(cluster, broker_id, topics)
            print(f"killed and restarted the {role} (broker {broker_id}) with {copied} records copied, "
                  f"{sum(copier.committed_offsets.values())} once it was back in sync")

        progress(0.15)
        kill_and_restart(_coordinator(cluster, txn), "transaction coordinator")
        progress(0.45)
        kill_and_restart(_leader(cluster, output, 0), "leader of the output's partition 0")

        # A producer that dies in the middle of its transaction on every output partition.
        hanging = subprocess.Popen([sys.executable, "-c", PRODUCE_AND_HANG, cluster.bootstrap,
                                    f"abandoned-{suffix}", output, str(PARTITIONS), str(ABANDONED_TIMEOUT_MS)],
                                   stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
        assert hanging.stdout is not None and hanging.stdout.readline().strip() == "produced"
        hanging.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        hanging.wait(10)
        held = watermarks(cluster.bootstrap, output, PARTITIONS, "read_committed")
        # read_committed consumers get past the open transaction once the coordinator aborts it.
        wait_for(lambda: all(now > held[p] for p, now in
                             watermarks(cluster.bootstrap, output, PARTITIONS, "read_committed").items()),
                 "the last stable offset to pass the abandoned transaction", 60)
        print(f"abandoned transaction (timeout {ABANDONED_TIMEOUT_MS} ms) held the LSO for at most "
              f"{time.monotonic() - killed_at:.1f} s after its producer was killed")
        abandoned_coordinator = cluster.brokers[_coordinator(cluster, f"abandoned-{suffix}")]
        abandoned = wait_for(lambda: (d := describe(abandoned_coordinator, f"abandoned-{suffix}"))
                             .transaction_state == "CompleteAbort" and d, "the abandoned transaction's abort")
        assert abandoned.producer_epoch == 1  # aborted under a bumped epoch: the dead producer is fenced

        progress(1.0)
    finally:
        copier.stop()
        if hanging is not None:
            hanging.kill()
            hanging.wait(10)
    print(f"copier: {copier.commits} commits, {copier.aborts} aborts, {copier.fenced} new producers; "
          f"errors handled: {sorted(set(copier.errors))}")

    copied = read_values(cluster.bootstrap, output, PARTITIONS, "read_committed")
    handled = f"copier errors: {copier.errors[-10:]}"
    assert {p: len(values) for p, values in copied.items()} == ends, handled
    assert copied == sent, handled  # every input record exactly once, in input order per partition
    everything = read_values(cluster.bootstrap, output, PARTITIONS, "read_uncommitted")
    assert all(b"left-open" in values for values in everything.values())  # on disk, aborted
    assert stable_end_offsets(cluster.bootstrap, source, PARTITIONS) == ends
