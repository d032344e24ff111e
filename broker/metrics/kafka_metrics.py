"""KafkaMetrics: the broker's state read at scrape time, as the MBeans a Kafka broker registers.

Nothing here runs on a hot path: the gauges are computed from the components' own state when
Prometheus scrapes (Kafka's gauges are callbacks too), and the counters they report are the plain
integers the components keep. ``collect`` runs on the event loop (the endpoint hops there), so it
reads loop-owned dicts without locks; the controller's and the ZooKeeper client's figures are
written by their own threads as whole ints or GIL-atomic deque appends.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING

from broker.coordinator.group.group_metadata import GroupState
from broker.metrics.broker_topic_stats import BrokerTopicMetrics
from broker.metrics.mbeans import MBeanFamilies
from coordination.controller.controller_metrics import STATE_TIMERS

if TYPE_CHECKING:
    from broker.network.request_handler import KafkaRequestHandlerPool
    from broker.network.socket_server import SocketServer
    from broker.services import BrokerServices

BROKER_TOPIC_METRICS = "kafka.server:type=BrokerTopicMetrics"
REQUEST_METRICS = "kafka.network:type=RequestMetrics"
REPLICA_MANAGER = "kafka.server:type=ReplicaManager"
KAFKA_CONTROLLER = "kafka.controller:type=KafkaController"
CONTROLLER_STATS = "kafka.controller:type=ControllerStats"
CONTROLLER_EVENT_MANAGER = "kafka.controller:type=ControllerEventManager"
GROUP_METADATA_MANAGER = "kafka.coordinator.group:type=GroupMetadataManager"
SESSION_EXPIRE_LISTENER = "kafka.server:type=SessionExpireListener"
RUNNING = 3  # Kafka's BrokerState.RUNNING
IDLE_SAMPLE_S = 5.0
IDLE_WINDOW_SAMPLES = 13  # one minute of samples, like the rates Kafka's gauges average over
GROUP_STATE_METRICS = (("NumGroupsPreparingRebalance", GroupState.PREPARING_REBALANCE),
                       ("NumGroupsCompletingRebalance", GroupState.COMPLETING_REBALANCE),
                       ("NumGroupsStable", GroupState.STABLE), ("NumGroupsDead", GroupState.DEAD),
                       ("NumGroupsEmpty", GroupState.EMPTY))


class LoopIdleMeter:
    """The share of the last minute the event loop thread did not run, for Kafka's
    NetworkProcessorAvgIdlePercent: every processor runs on that one loop, and its CPU time is what
    a busy processor would use. Sampled on the loop every few seconds (thread CPU time is only
    readable by its own thread)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[int, int]] = deque(maxlen=IDLE_WINDOW_SAMPLES)
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._sample()

    def _sample(self) -> None:
        self._samples.append((time.monotonic_ns(), time.thread_time_ns()))
        self._timer = asyncio.get_running_loop().call_later(IDLE_SAMPLE_S, self._sample)

    def idle_fraction(self) -> float:
        """Call on the loop thread."""
        if not self._samples:
            return 1.0
        wall0, cpu0 = self._samples[0]
        wall, cpu = time.monotonic_ns(), time.thread_time_ns()
        if wall <= wall0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (cpu - cpu0) / (wall - wall0)))

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class KafkaMetrics:
    def __init__(self, services: BrokerServices, socket_server: SocketServer, pool: KafkaRequestHandlerPool,
                 loop_idle: LoopIdleMeter) -> None:
        self.services = services
        self.socket_server = socket_server
        self.pool = pool
        self.loop_idle = loop_idle

    def collect(self, families: MBeanFamilies) -> None:
        families.gauge("kafka.server:type=KafkaServer", "BrokerState", RUNNING)
        self._broker_topic_metrics(families)
        self._request_metrics(families)
        self._network(families)
        self._replica_manager(families)
        self._logs(families)
        self._controller(families)
        self._group_coordinator(families)
        self._zookeeper(families)

    def _broker_topic_metrics(self, families: MBeanFamilies) -> None:
        stats = self.services.replica_manager.topic_stats
        for attribute, name in BrokerTopicMetrics.METERS + BrokerTopicMetrics.ALL_TOPICS_ONLY:
            families.meter(BROKER_TOPIC_METRICS, name, getattr(stats.all_topics, attribute))
        for topic, topic_stats in stats.topics.items():
            for attribute, name in BrokerTopicMetrics.METERS:
                families.meter(BROKER_TOPIC_METRICS, name, getattr(topic_stats, attribute), topic=topic)

    def _request_metrics(self, families: MBeanFamilies) -> None:
        metrics = self.socket_server.request_channel.metrics
        if metrics is None:
            return
        for (request, version), count in metrics.requests.items():
            families.meter(REQUEST_METRICS, "RequestsPerSec", count, request=request, version=str(version))
        for (request, error), count in metrics.errors.items():
            families.meter(REQUEST_METRICS, "ErrorsPerSec", count, request=request, error=error)
        for request, times in metrics.times.items():
            for name, values in times.quantiles():
                families.histogram(REQUEST_METRICS, name, times.count, values, request=request)

    def _network(self, families: MBeanFamilies) -> None:
        families.gauge("kafka.network:type=SocketServer", "NetworkProcessorAvgIdlePercent",
                       self.loop_idle.idle_fraction())
        families.gauge("kafka.network:type=RequestChannel", "RequestQueueSize", len(self.socket_server.request_channel))
        for processor in self.socket_server.processors:
            per_listener: dict[str, int] = {}
            for channel in processor.connections.values():
                name = channel.listener.listener_name
                per_listener[name] = per_listener.get(name, 0) + 1
            for endpoint in self.socket_server.config.listeners:
                # jmx_exporter's rule for Kafka's socket-server-metrics attributes by listener and processor.
                families.kafka_metric("kafka.server:type=socket-server-metrics", "connection-count",
                                        per_listener.get(endpoint.listener_name, 0),
                                        listener=endpoint.listener_name, networkProcessor=str(processor.id))
        pool = self.pool
        idle = pool.idle_time_ns() / pool.num_threads  # Kafka marks each wait divided by the thread count
        elapsed = time.monotonic_ns() - pool.started_ns
        families.meter("kafka.server:type=KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent", idle,
                       mean_rate=min(1.0, idle / elapsed) if elapsed > 0 else 1.0)

    def _replica_manager(self, families: MBeanFamilies) -> None:
        replica_manager = self.services.replica_manager
        leaders = under_replicated = under_min_isr = at_min_isr = 0
        for partition in replica_manager.partitions.values():
            if not partition.is_leader:
                continue
            leaders += 1
            isr = len(partition.isr)
            if isr < len(partition.replicas):
                under_replicated += 1
            assert partition.log is not None
            min_isr = partition.log.config.min_insync_replicas
            if isr < min_isr:
                under_min_isr += 1
            elif isr == min_isr:
                at_min_isr += 1
        families.gauge(REPLICA_MANAGER, "PartitionCount", len(replica_manager.partitions))
        families.gauge(REPLICA_MANAGER, "LeaderCount", leaders)
        families.gauge(REPLICA_MANAGER, "UnderReplicatedPartitions", under_replicated)
        families.gauge(REPLICA_MANAGER, "UnderMinIsrPartitionCount", under_min_isr)
        families.gauge(REPLICA_MANAGER, "AtMinIsrPartitionCount", at_min_isr)
        families.gauge(REPLICA_MANAGER, "OfflineReplicaCount", len(replica_manager.offline_partitions))
        families.meter(REPLICA_MANAGER, "IsrShrinksPerSec", replica_manager.isr_shrinks)
        families.meter(REPLICA_MANAGER, "IsrExpandsPerSec", replica_manager.isr_expands)
        for purgatory in (replica_manager.produce_purgatory, replica_manager.fetch_purgatory):
            _purgatory(families, purgatory.name, purgatory.watched(), purgatory.delayed())
        fetchers = replica_manager.fetcher_manager
        bean = "kafka.server:type=ReplicaFetcherManager"
        families.gauge(bean, "MaxLag", fetchers.max_lag() if fetchers is not None else 0, clientId="Replica")
        families.gauge(bean, "MinFetchRate", fetchers.min_fetch_rate() if fetchers is not None else 0.0,
                       clientId="Replica")
        families.gauge(bean, "DeadThreadCount", fetchers.dead_thread_count() if fetchers is not None else 0,
                       clientId="Replica")
        families.gauge(bean, "FailedPartitionsCount",
                       fetchers.failed_partitions_count() if fetchers is not None else 0, clientId="Replica")

    def _logs(self, families: MBeanFamilies) -> None:
        log_manager = self.services.log_manager
        for (topic, partition), tp_log in log_manager.all_logs().items():
            keys = {"topic": topic, "partition": str(partition)}
            families.gauge("kafka.log:type=Log", "Size", tp_log.size, **keys)
            families.gauge("kafka.log:type=Log", "NumLogSegments", len(tp_log.segments), **keys)
            families.gauge("kafka.log:type=Log", "LogStartOffset", tp_log.log_start_offset, **keys)
            families.gauge("kafka.log:type=Log", "LogEndOffset", tp_log.log_end_offset, **keys)
        live = set(log_manager.live_log_dirs)
        families.gauge("kafka.log:type=LogManager", "OfflineLogDirectoryCount", len(log_manager.log_dirs) - len(live))
        for log_dir in log_manager.log_dirs:
            families.gauge("kafka.log:type=LogManager", "LogDirectoryOffline", 0 if log_dir in live else 1,
                           logDirectory=log_dir)

    def _controller(self, families: MBeanFamilies) -> None:
        controller = self.services.controller
        metrics = controller.metrics
        families.gauge(KAFKA_CONTROLLER, "ActiveControllerCount", 1 if controller.is_active else 0)
        families.gauge(KAFKA_CONTROLLER, "ControllerState", metrics.state)
        families.gauge(KAFKA_CONTROLLER, "OfflinePartitionsCount", metrics.offline_partitions_count)
        families.gauge(KAFKA_CONTROLLER, "PreferredReplicaImbalanceCount", metrics.preferred_replica_imbalance_count)
        families.gauge(KAFKA_CONTROLLER, "GlobalTopicCount", metrics.global_topic_count)
        families.gauge(KAFKA_CONTROLLER, "GlobalPartitionCount", metrics.global_partition_count)
        families.gauge(KAFKA_CONTROLLER, "TopicsToDeleteCount", metrics.topics_to_delete_count)
        families.gauge(KAFKA_CONTROLLER, "ReplicasToDeleteCount", metrics.replicas_to_delete_count)
        families.gauge(KAFKA_CONTROLLER, "TopicsIneligibleToDeleteCount", metrics.topics_ineligible_to_delete_count)
        families.meter(CONTROLLER_STATS, "UncleanLeaderElectionsPerSec", metrics.unclean_leader_elections)
        for state, name in STATE_TIMERS.items():
            timer = metrics.state_times_ms[state]
            families.histogram(CONTROLLER_STATS, name, timer.count, timer.quantiles())
        events = controller.event_manager
        families.gauge(CONTROLLER_EVENT_MANAGER, "EventQueueSize", events.queue_size)
        families.histogram(CONTROLLER_EVENT_MANAGER, "EventQueueTimeMs", events.queue_time_ms.count,
                           events.queue_time_ms.quantiles())

    def _group_coordinator(self, families: MBeanFamilies) -> None:
        coordinator = self.services.group_coordinator
        groups = coordinator.manager.current_groups() if coordinator is not None else []
        families.gauge(GROUP_METADATA_MANAGER, "NumGroups", len(groups))
        for name, state in GROUP_STATE_METRICS:
            families.gauge(GROUP_METADATA_MANAGER, name, sum(1 for g in groups if g.state is state))
        families.gauge(GROUP_METADATA_MANAGER, "NumOffsets", sum(len(g.offsets) for g in groups))
        # The coordinator's timers stand for Kafka's Heartbeat and Rebalance purgatories' operations.
        heartbeats = coordinator.delayed_heartbeats() if coordinator is not None else 0
        rebalances = coordinator.delayed_rebalances() if coordinator is not None else 0
        _purgatory(families, "Heartbeat", heartbeats, heartbeats)
        _purgatory(families, "Rebalance", rebalances, rebalances)

    def _zookeeper(self, families: MBeanFamilies) -> None:
        zk = self.services.zk.zk
        families.meter(SESSION_EXPIRE_LISTENER, "ZooKeeperExpiresPerSec", zk.expires)
        families.meter(SESSION_EXPIRE_LISTENER, "ZooKeeperDisconnectsPerSec", zk.disconnects)
        families.meter(SESSION_EXPIRE_LISTENER, "ZooKeeperSyncConnectsPerSec", zk.sync_connects)
        latency = zk.request_latency_ms
        families.histogram("kafka.server:type=ZooKeeperClientMetrics", "ZooKeeperRequestLatencyMs", latency.count,
                           latency.quantiles())


def _purgatory(families: MBeanFamilies, name: str, watched: int, delayed: int) -> None:
    bean = "kafka.server:type=DelayedOperationPurgatory"
    families.gauge(bean, "PurgatorySize", watched, delayedOperation=name)
    families.gauge(bean, "NumDelayedOperations", delayed, delayedOperation=name)
