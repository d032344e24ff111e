"""The metrics' pure parts: jmx_exporter/Strimzi names, Yammer's percentiles, Kafka's error counts,
BrokerTopicStats and kafka_exporter's lag arithmetic."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from broker.metrics.broker_topic_stats import BrokerTopicStats
from broker.metrics.consumer_lag import ConsumerLag
from broker.metrics.mbeans import MBeanFamilies
from broker.metrics.request_metrics import error_counts
from coordination.histogram import Histogram, quantile
from protocol.errors import Errors
from protocol.messages import FetchResponse, MetadataResponse, ProduceResponse


def exposition(metrics: list) -> list[str]:  # type: ignore[type-arg]
    class Collector:
        def collect(self):  # type: ignore[no-untyped-def]
            return metrics

    registry = CollectorRegistry()
    registry.register(Collector())
    return [line for line in generate_latest(registry).decode().splitlines() if not line.startswith("# HELP")]


def test_mbeans_are_named_as_jmx_exporter_with_strimzis_kafka_rules() -> None:
    # Expected names worked out by hand from Strimzi's kafka-metrics.yaml (lowercaseOutputName: true).
    families = MBeanFamilies()
    families.meter("kafka.server:type=BrokerTopicMetrics", "MessagesInPerSec", 7)
    families.meter("kafka.server:type=BrokerTopicMetrics", "BytesInPerSec", 700, topic="orders")
    families.meter("kafka.network:type=RequestMetrics", "RequestsPerSec", 3, request="Produce", version="9")
    families.meter("kafka.network:type=RequestMetrics", "ErrorsPerSec", 1, request="Produce", error="NONE")
    families.histogram("kafka.network:type=RequestMetrics", "TotalTimeMs", 3, [("0.50", 1.0), ("0.999", 4.0)],
                       request="Produce")
    families.gauge("kafka.network:type=SocketServer", "NetworkProcessorAvgIdlePercent", 0.75)
    families.meter("kafka.server:type=KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent", 5e9, mean_rate=0.5)
    families.gauge("kafka.server:type=ReplicaManager", "UnderReplicatedPartitions", 2)
    families.meter("kafka.server:type=ReplicaManager", "IsrShrinksPerSec", 1)
    families.gauge("kafka.log:type=Log", "LogEndOffset", 42, topic="orders", partition="0")
    families.gauge("kafka.server:type=DelayedOperationPurgatory", "PurgatorySize", 0, delayedOperation="Fetch")
    families.gauge("kafka.server:type=ReplicaFetcherManager", "MaxLag", 0, clientId="Replica")
    families.histogram("kafka.controller:type=ControllerStats", "LeaderElectionRateAndTimeMs", 1, [("0.99", 8.0)])
    families.meter("kafka.controller:type=ControllerStats", "UncleanLeaderElectionsPerSec", 0)
    families.kafka_metric("kafka.server:type=socket-server-metrics", "connection-count", 2, listener="PLAINTEXT",
                          networkProcessor="0")
    families.gauge("kafka.coordinator.group:type=GroupMetadataManager", "NumGroupsStable", 1)
    lines = exposition(list(families))
    for expected in [
        "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter",
        "kafka_server_brokertopicmetrics_messagesin_total 7.0",
        'kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 700.0',
        'kafka_network_requestmetrics_requests_total{request="Produce",version="9"} 3.0',
        'kafka_network_requestmetrics_errors_total{error="NONE",request="Produce"} 1.0',
        'kafka_network_requestmetrics_totaltimems{quantile="0.50",request="Produce"} 1.0',
        'kafka_network_requestmetrics_totaltimems{quantile="0.999",request="Produce"} 4.0',
        'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 3.0',
        "kafka_network_socketserver_networkprocessoravgidle_percent 0.75",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_count 5e+09",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent 0.5",
        "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge",
        "kafka_server_replicamanager_underreplicatedpartitions 2.0",
        "kafka_server_replicamanager_isrshrinks_total 1.0",
        'kafka_log_log_logendoffset{partition="0",topic="orders"} 42.0',
        'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"} 0.0',
        'kafka_server_replicafetchermanager_maxlag{clientId="Replica"} 0.0',
        'kafka_controller_controllerstats_leaderelectionrateandtimems{quantile="0.99"} 8.0',
        "kafka_controller_controllerstats_leaderelectionrateandtimems_count 1.0",
        "kafka_controller_controllerstats_uncleanleaderelections_total 0.0",
        'kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT",networkProcessor="0"} 2.0',
        "kafka_coordinator_group_groupmetadatamanager_numgroupsstable 1.0",
    ]:
        assert expected in lines, expected


def test_percentiles_interpolate_as_yammer_snapshots_do() -> None:
    values = [float(v) for v in range(1, 101)]
    assert quantile(values, 0.5) == 50.5
    assert abs(quantile(values, 0.99) - 99.99) < 1e-9
    assert quantile(values, 0.999) == 100.0
    assert quantile([], 0.5) == 0.0
    assert quantile([3.0], 0.5) == 3.0


def test_histogram_keeps_the_last_1028_samples_and_counts_them_all() -> None:
    histogram = Histogram()
    for value in range(3000):
        histogram.update(value)
    assert histogram.count == 3000
    assert len(histogram.samples) == 1028
    assert min(histogram.samples) == 3000 - 1028
    assert abs(dict(histogram.quantiles())["0.999"] - 2998.971) < 1e-6  # 0.999 * 1029 = 1027.971


def test_error_counts_count_every_error_code_of_a_response() -> None:
    P = ProduceResponse
    produce = P(responses=[P.TopicProduceResponse(name="t", partition_responses=[
        P.PartitionProduceResponse(index=0, error_code=0), P.PartitionProduceResponse(index=1, error_code=0),
        P.PartitionProduceResponse(index=2, error_code=int(Errors.NOT_LEADER_OR_FOLLOWER))])])
    assert error_counts(produce) == {0: 2, int(Errors.NOT_LEADER_OR_FOLLOWER): 1}
    F = FetchResponse
    fetch = F(error_code=0, responses=[F.FetchableTopicResponse(topic="t", partitions=[
        F.PartitionData(partition_index=0, error_code=int(Errors.OFFSET_OUT_OF_RANGE))])])
    assert error_counts(fetch) == {0: 1, int(Errors.OFFSET_OUT_OF_RANGE): 1}
    M = MetadataResponse
    metadata = M(topics=[M.MetadataResponseTopic(name="t", error_code=0, partitions=[
        M.MetadataResponsePartition(partition_index=0, error_code=0)])])
    assert error_counts(metadata) == {0: 2}


def test_broker_topic_stats_count_per_topic_and_for_all_topics() -> None:
    stats = BrokerTopicStats()
    stats.mark_produce("a")
    stats.mark_appended("a", 100, 10)
    stats.mark_appended("b", 50, 5)
    stats.mark_bytes_out("a", 70, from_follower=False)
    stats.mark_bytes_out("a", 30, from_follower=True)
    assert (stats.topic("a").messages_in, stats.topic("b").messages_in, stats.all_topics.messages_in) == (10, 5, 15)
    assert (stats.topic("a").bytes_out, stats.all_topics.bytes_out, stats.all_topics.replication_bytes_out) == (70, 70, 30)
    stats.remove("a")
    assert "a" not in stats.topics and stats.all_topics.bytes_in == 150


def test_consumer_lag_is_the_end_offset_minus_the_committed_one() -> None:
    metrics = ConsumerLag._group_offsets({"g": {("t", 0): 40, ("t", 1): 100, ("t", 2): -1}},
                                         {("t", 0): 100, ("t", 1): 100, ("t", 2): 7})
    lines = exposition(metrics)
    assert 'kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="t"} 40.0' in lines
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="0",topic="t"} 60.0' in lines
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="1",topic="t"} 0.0' in lines
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="2",topic="t"} -1.0' in lines
    assert 'kafka_consumergroup_lag_sum{consumergroup="g",topic="t"} 60.0' in lines


def test_a_quota_throttle_is_in_the_requests_throttle_time_histogram() -> None:
    from types import SimpleNamespace

    from broker.metrics.request_metrics import TIME_HISTOGRAMS, RequestMetrics
    from protocol.api_keys import ApiKey

    metrics = RequestMetrics()
    for throttle_ms in (0, 0, 250):
        request = SimpleNamespace(api_key=int(ApiKey.PRODUCE), api_version=9, receive_time_ns=0, dequeue_time_ns=0,
                                  response_complete_ns=2_000_000, api_local_complete_ns=1_000_000,
                                  buffer=bytearray(100), header=SimpleNamespace(header_size=20),
                                  throttle_time_ms=throttle_ms)
        metrics.on_complete(request, 3_000_000, 4_000_000)  # type: ignore[arg-type]
    by_name = dict(metrics.times["Produce"].quantiles())
    assert "ThrottleTimeMs" in TIME_HISTOGRAMS
    assert dict(by_name["ThrottleTimeMs"])["0.999"] == 250 and dict(by_name["ThrottleTimeMs"])["0.50"] == 0
    assert dict(by_name["TotalTimeMs"])["0.50"] == 4 and dict(by_name["RequestBytes"])["0.50"] == 80
