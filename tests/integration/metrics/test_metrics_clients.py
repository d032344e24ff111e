"""/metrics scraped while real clients produce, consume and commit on three brokers: the counts equal
what the clients did (librdkafka's own request counts included), and consumer lag equals the end
offset the client sees minus the offset it committed."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.prometheus import Samples, matching, total, value
from tests.harness.waiting import wait_for
from tests.integration.metrics.conftest import MeteredCluster, metered_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(shared_zookeeper, tmp_path_factory: pytest.TempPathFactory,  # type: ignore[no-untyped-def]
            request: pytest.FixtureRequest) -> Iterator[MeteredCluster]:
    zk_connect = shared_zookeeper.connect_string_with_chroot(f"kafka-{uuid.uuid4().hex[:12]}")
    yield from metered_cluster(3, zk_connect, tmp_path_factory.mktemp("metrics"), request,
                               {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3"})


def create_topic(cluster: MeteredCluster, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config=config or {})])[topic].result(30)
    cluster.brokers[0].wait_for_leaders(topic, partitions, timeout=30)


class ClientStats:
    """librdkafka's statistics: how many requests of each kind the client sent, per broker."""

    def __init__(self) -> None:
        self.latest: dict[str, object] = {}

    def __call__(self, raw: str) -> None:
        self.latest = json.loads(raw)

    def requests(self, kind: str) -> int:
        brokers = self.latest.get("brokers", {})
        assert isinstance(brokers, dict)
        # Every connection: the brokers', the bootstrap ones and the group coordinator's.
        return sum(b.get("req", {}).get(kind, 0) for b in brokers.values())


def refresh(client: Producer | Consumer, stats: ClientStats) -> None:
    """Wait for a statistics report made after everything so far."""
    stats.latest = {}

    def reported() -> dict[str, object]:
        client.poll(0.1)  # statistics callbacks run in poll
        return stats.latest

    wait_for(reported, "a librdkafka statistics report", timeout=10)


def counters(samples: list[Samples], topic: str) -> dict[str, float]:
    names = ["messagesin", "bytesin", "bytesout", "totalproducerequests", "totalfetchrequests",
             "failedproducerequests", "bytesrejected"]
    out = {n: total(samples, f"kafka_server_brokertopicmetrics_{n}_total", topic=topic) for n in names}
    for name in ("replicationbytesin", "replicationbytesout"):  # counted for all topics only, as in Kafka
        out[name] = total(samples, f"kafka_server_brokertopicmetrics_{name}_total")
    for request in ("Produce", "OffsetCommit", "Fetch", "FetchConsumer"):
        out[request] = sum(v for s in samples for v in matching(s, "kafka_network_requestmetrics_requests_total",
                                                                 request=request).values())
    out["produce NONE"] = total(samples, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE")
    out["produce MESSAGE_TOO_LARGE"] = total(samples, "kafka_network_requestmetrics_errors_total",
                                             request="Produce", error="MESSAGE_TOO_LARGE")
    return out


def test_counts_equal_what_producers_and_consumers_did(cluster: MeteredCluster) -> None:
    topic = "counted"
    create_topic(cluster, topic, 3)
    before = counters(cluster.scrape_all(), topic)
    stats = ClientStats()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                         "statistics.interval.ms": 100, "stats_cb": stats})
    failures: list[object] = []
    for i in range(3000):
        producer.produce(topic, value=b"%099d" % i, partition=i % 3,
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(60) == 0 and failures == []
    refresh(producer, stats)
    produce_requests = stats.requests("Produce")

    consumer_stats = ClientStats()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "counted-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "statistics.interval.ms": 100, "stats_cb": consumer_stats})
    try:
        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + 60
        while received < 3000 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received += 1
                if received % 1000 == 0:
                    consumer.commit(asynchronous=False)
        assert received == 3000
        refresh(consumer, consumer_stats)
        commits = consumer_stats.requests("OffsetCommit")
    finally:
        consumer.close()

    after = counters(cluster.scrape_all(), topic)
    delta = {k: after[k] - before[k] for k in after}
    assert delta["messagesin"] == 3000
    assert delta["Produce"] == produce_requests > 0  # every Produce request the client sent, counted once
    assert delta["OffsetCommit"] == commits == 3
    # Each partition of each produce request: counted by the topic's counter and answered NONE.
    assert delta["produce NONE"] == delta["totalproducerequests"] >= 3
    assert delta["failedproducerequests"] == delta["bytesrejected"] == 0
    # Bytes in are the batches appended: what the leaders' logs hold.
    samples = cluster.scrape_all()
    leaders = {p: cluster.brokers[0].metadata([topic]).topics[0].partitions[p].leader_id for p in range(3)}
    assert delta["bytesin"] == sum(value(samples[leaders[p]], "kafka_log_log_size", topic=topic, partition=str(p))
                                   for p in range(3))
    assert all(value(samples[leaders[p]], "kafka_log_log_logendoffset", topic=topic, partition=str(p)) == 1000
               for p in range(3))
    # Both followers of each partition appended every batch (and the offset commits besides), all
    # of it sent by the leaders; the fetchers are alive, fetching, and none failed.
    assert delta["replicationbytesout"] >= delta["replicationbytesin"] >= 2 * delta["bytesin"] > 0
    for broker_samples in samples:
        fetchers = {"clientId": "Replica"}
        assert value(broker_samples, "kafka_server_replicafetchermanager_minfetchrate", **fetchers) > 0
        assert value(broker_samples, "kafka_server_replicafetchermanager_deadthreadcount", **fetchers) == 0
        assert value(broker_samples, "kafka_server_replicafetchermanager_failedpartitionscount", **fetchers) == 0
    # The consumer read every batch at least once, in fetches counted as Fetch and FetchConsumer.
    assert delta["bytesout"] >= delta["bytesin"]
    assert delta["totalfetchrequests"] > 0 and delta["Fetch"] >= delta["FetchConsumer"] > 0
    # Request times are there for what was served, with Kafka's quantiles.
    leader = samples[leaders[0]]
    quantiles = matching(leader, "kafka_network_requestmetrics_totaltimems", request="Produce")
    assert {dict(k)["quantile"] for k in quantiles} == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert value(leader, "kafka_network_requestmetrics_totaltimems_count", request="Produce") > 0


def test_the_controller_times_each_kind_of_event_as_kafka_does(cluster: MeteredCluster) -> None:
    """ControllerStats' per-state timers and the event queue's metrics, on the active controller."""
    before = cluster.scrape_all()
    create_topic(cluster, "timed-topic", 2)
    after = cluster.scrape_all()
    active = [i for i, samples in enumerate(after)
              if value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1]
    assert len(active) == 1
    controller, earlier = after[active[0]], before[active[0]]
    topic_changes = "kafka_controller_controllerstats_topicchangerateandtimems_count"
    assert value(controller, topic_changes) > value(earlier, topic_changes)
    assert {dict(k)["quantile"] for k in matching(controller, "kafka_controller_controllerstats_topicchangerateandtimems")} \
        == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    for samples in after:  # every broker has every timer and the queue's metrics, as Kafka's do
        assert ("kafka_controller_controllerstats_partitionreassignmentrateandtimems_count", frozenset()) in samples
        assert ("kafka_controller_controllereventmanager_eventqueuesize", frozenset()) in samples
        assert value(samples, "kafka_controller_controllereventmanager_eventqueuetimems_count") > 0


def test_refused_records_count_as_kafka_counts_them(cluster: MeteredCluster) -> None:
    topic = "small-records"
    create_topic(cluster, topic, 1, {"max.message.bytes": "1024"})
    before = counters(cluster.scrape_all(), topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.max.bytes": 100000,
                         "retries": 0})
    errors: list[KafkaError] = []
    producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    delta = {k: v - before[k] for k, v in counters(cluster.scrape_all(), topic).items()}
    assert delta["produce MESSAGE_TOO_LARGE"] == 1
    assert delta["bytesrejected"] > 5000  # the whole batch
    assert delta["messagesin"] == 0
    assert delta["failedproducerequests"] == 0  # Kafka does not count too-large records as failed produces


def test_consumer_lag_is_the_end_offset_minus_the_committed_offset(cluster: MeteredCluster) -> None:
    topic, group = "lagged", "lag-group"
    create_topic(cluster, topic, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p, count in enumerate((100, 200, 300)):
        for i in range(count):
            producer.produce(topic, value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0
    committed = {0: 10, 1: 150, 2: 300}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in committed}
    finally:
        consumer.close()
    assert ends == {0: 100, 1: 200, 2: 300}

    def exported() -> tuple[int, dict[int, float], dict[int, float], dict[int, float]] | None:
        samples = cluster.scrape_all()
        reporting = [s for s in samples if matching(s, "kafka_consumergroup_current_offset", consumergroup=group)]
        if len(reporting) != 1:
            return None
        only = reporting[0]
        offsets = {p: value(only, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic,
                            partition=str(p)) for p in committed}
        lags = {int(dict(k)["partition"]): v
                for k, v in matching(only, "kafka_consumergroup_lag", consumergroup=group, topic=topic).items()}
        current = {p: total(samples, "kafka_topic_partition_current_offset", topic=topic, partition=str(p))
                   for p in committed}
        return samples.index(only), offsets, lags, current

    coordinator, offsets, lags, current = wait_for(exported, "the coordinator's lag metrics", timeout=30)
    assert offsets == {p: float(o) for p, o in committed.items()}
    assert lags == {p: float(ends[p] - committed[p]) for p in committed}  # partitions led elsewhere too
    assert current == {p: float(e) for p, e in ends.items()}  # each partition reported by its leader once
    samples = cluster.scrape(coordinator)
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 90 + 50 + 0
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1


def test_a_live_group_member_is_awaited_in_the_heartbeat_purgatory(cluster: MeteredCluster) -> None:
    topic = "heartbeats"
    create_topic(cluster, topic, 1)

    def delayed(operation: str) -> float:
        return total(cluster.scrape_all(), "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                     delayedOperation=operation)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "heartbeat-group",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        members = delayed("Heartbeat")
        assert members >= 1  # our member's session, awaited by its coordinator
    finally:
        consumer.close()
    wait_for(lambda: delayed("Heartbeat") == members - 1, "the member's heartbeat to leave the purgatory", timeout=15)
    for broker_samples in cluster.scrape_all():  # every broker exports all four purgatories, as Kafka's do
        assert {dict(k)["delayedOperation"] for k in matching(
            broker_samples, "kafka_server_delayedoperationpurgatory_purgatorysize")} >= {
            "Produce", "Fetch", "Heartbeat", "Rebalance"}
