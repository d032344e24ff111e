"""KafkaServer: starts and stops one ZooKeeper-mode broker in Kafka's order.

Startup: meta.properties check, ZooKeeper, cluster id, LogManager (recovery unless the
clean-shutdown marker is there), SocketServer, request handlers, registration under
/brokers/ids with the bound (advertised) endpoints, controller election, topic config
notifications. Shutdown: controlled shutdown through the controller, stop serving, close
the logs cleanly (marker written), resign and close the ZooKeeper session (which removes the
registration).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from broker import handlers
from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.admin import dynamic_broker_config
from broker.config import KafkaConfig
from broker.config_defs import ConfigError, parse_http_listener
from broker.admin.group_configs import GroupConfigManager
from broker.coordinator.consumer.consumer_group_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator
from broker.coordinator.group.group_coordinator import GroupCoordinator
from broker.share.share_services import build_share_services
from broker.coordinator.group.group_metadata_manager import GroupConfig
from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from broker.coordinator.transaction.transaction_state_manager import TransactionConfig
from broker.fetch_session import FetchSessionCache
from broker.kafka_apis import SHARE_GROUP_APIS, KafkaApis, RegisteredApiVersionManager, disabled_apis
from broker.metadata_cache import MetadataCache
from broker.metrics.consumer_lag import ConsumerLag
from broker.metrics.kafka_metrics import KafkaMetrics, LoopIdleMeter
from broker.metrics.prometheus_endpoint import PrometheusEndpoint
from broker.metrics.request_metrics import RequestMetrics
from broker.network.request_handler import KafkaRequestHandlerPool
from broker.network.socket_server import SocketServer
from broker.replica_manager import ReplicaManager
from broker.replication.alter_partition_manager import AlterPartitionManager
from broker.replication.replica_alter_log_dirs_manager import ReplicaAlterLogDirsManager
from broker.replication.replica_fetcher import FetcherConfig
from broker.replication.replica_fetcher_manager import ReplicaFetcherManager
from broker.replication.replication_quota import ReplicationQuotas
from broker.security.authorization import AuthHelper
from broker.security.authorizer.acl_authorizer import ACL_AUTHORIZER_CLASS, AclAuthorizer, parse_super_users
from broker.quota.client_quota_manager import QuotaManagers
from broker.quota.quota_configs import CONNECTION_CREATION_RATE
from broker.security.client_security import PLAINTEXT, ClientSecurity
from broker.security.ssl_factory import SslFactory
from broker.security.zookeeper_security import zookeeper_client_security
from broker.security.credential_cache import CredentialCache
from broker.security.delegation_token_manager import DelegationTokenManager
from broker.services import BrokerServices, ConfigRepository
from coordination.admin_zk_client import AdminZkClient
from coordination.blocking_rpc import send_request
from coordination.broker_registration import BrokerRegistration, check_cluster_id, get_or_create_cluster_id
from coordination.config_change_listener import ConfigChangeListener
from coordination.feature_change_listener import FinalizedFeatureChangeListener
from coordination.errors import CoordinationError
from coordination.controller.kafka_controller import ControllerConfig, KafkaController
from coordination.controller_epoch import ControllerEpochFence
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import BrokerEndPoint, BrokerInfo, SecurityProtocol
from coordination.producer_id_manager import ProducerIdManager, allocate_producer_id_block
from coordination.zk_admin_data import DEFAULT_ENTITY, desanitize_entity
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import ControlledShutdownRequest
from storage.cleaner.cleaner_config import CleanerConfig
from storage.log_config import broker_defaults
from storage.log_manager import LogManager
from storage.meta_properties import MetaProperties, read_meta_properties
from storage.producer_state import ProducerStateManagerConfig

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3


def _read_meta_properties(log_dirs: list[str]) -> tuple[dict[str, MetaProperties | None], list[str]]:
    """Each log dir's meta.properties (None where there is none), and the dirs where it could not be
    read: those start offline, as Kafka's MetaPropertiesEnsemble error dirs do."""
    stored: dict[str, MetaProperties | None] = {}
    unreadable = []
    for log_dir in log_dirs:
        try:
            stored[log_dir] = read_meta_properties(log_dir)
        except OSError as exc:
            log.error("Failed to read meta.properties of log dir %s: %s", log_dir, exc)
            unreadable.append(log_dir)
    return stored, unreadable


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.client_security = PLAINTEXT
        self.authorizer: AclAuthorizer | None = None
        self.quotas: QuotaManagers | None = None
        self.services: BrokerServices | None = None
        self.socket_server: SocketServer | None = None
        self.registration: BrokerRegistration | None = None
        self.config_listener: ConfigChangeListener | None = None
        self.feature_listener: FinalizedFeatureChangeListener | None = None
        self._shutdown_started = False
        self._controller_started = False
        self.log_manager: LogManager | None = None
        self._isr_expiration: asyncio.Task[None] | None = None
        self._token_expiry: asyncio.Task[None] | None = None
        self.replication_quotas: ReplicationQuotas | None = None
        self.metrics_endpoint: PrometheusEndpoint | None = None

    # --- startup ------------------------------------------------------------------------------
    async def startup(self) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        log.info("starting")
        # How this broker reaches the others; a bad keystore or JAAS config stops start-up here (an
        # OAUTHBEARER login at an identity provider waits for its token: off the loop).
        self.client_security = await loop.run_in_executor(None, ClientSecurity.inter_broker, config)
        stored, unreadable = _read_meta_properties(config.log_dirs)
        zk_security = zookeeper_client_security(config)
        log.info("Connecting to zookeeper on %s%s%s%s", config.zookeeper_connect,
                 " over TLS" if zk_security.ssl_context else "",
                 " with SASL/DIGEST-MD5" if zk_security.sasl_options else "",
                 ", secure ACLs" if zk_security.secure_acls else "")
        zk = await loop.run_in_executor(None, lambda: KafkaZkClient.connect(
            config.zookeeper_connect, config.zookeeper_session_timeout_ms,
            config.zookeeper_connection_timeout_ms, f"broker-{config.broker_id}",
            config.zookeeper_max_in_flight_requests, zk_security.ssl_context, zk_security.sasl_options,
            zk_security.secure_acls))
        try:
            await self._startup_with_zk(zk, stored, unreadable)
        except BaseException:
            if self.metrics_endpoint is not None:
                await self.metrics_endpoint.stop()
            if self.socket_server is not None:
                self.socket_server.shutdown()  # on the loop: it owns the sockets' readers
            await loop.run_in_executor(None, self._close_partial, zk)
            raise

    async def _startup_with_zk(self, zk: KafkaZkClient, stored: dict[str, Any], unreadable: list[str]) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, zk.create_top_level_paths)
        cluster_id = await loop.run_in_executor(None, get_or_create_cluster_id, zk)
        log.info("Cluster ID = %s", cluster_id)
        check_cluster_id(cluster_id, {d: (m.cluster_id if m else None) for d, m in stored.items()})
        broker_id = await loop.run_in_executor(None, self._resolve_broker_id, zk, stored)
        log.info("[KafkaServer id=%d] starting", broker_id)

        topic_configs = await loop.run_in_executor(None, _all_topic_configs, zk)
        log_manager = LogManager(
            config.log_dirs, broker_defaults(config.values()), topic_configs=topic_configs,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            flush_check_interval_ms=config.log_flush_scheduler_interval_ms,
            flush_recovery_offset_checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
            flush_start_offset_checkpoint_interval_ms=config.log_flush_start_offset_checkpoint_interval_ms,
            high_watermark_checkpoint_interval_ms=config.replica_high_watermark_checkpoint_interval_ms,
            producer_state_config=ProducerStateManagerConfig(
                config.producer_id_expiration_ms, config.get("transaction.partition.verification.enable")),
            producer_id_expiration_check_interval_ms=config.get("producer.id.expiration.check.interval.ms"),
            cleaner_config=CleanerConfig.from_props(config.values()),
            initial_task_delay_ms=config.get("log.initial.task.delay.ms"),
        )
        await loop.run_in_executor(None, log_manager.startup, broker_id, cluster_id, unreadable)
        self.log_manager = log_manager

        handlers.load_all()
        disabled = disabled_apis(config.get("group.coordinator.rebalance.protocols"))
        if not config.get("group.share.enable"):
            disabled |= SHARE_GROUP_APIS
        api_versions = RegisteredApiVersionManager(config.unstable_api_versions_enable, disabled)
        # SCRAM credentials and client quotas are in memory before the first connection can use them.
        credentials = CredentialCache()
        quotas = self.quotas = QuotaManagers(config.get("quota.window.num"), config.get("quota.window.size.seconds"),
                                             config.get("controller.quota.window.num"),
                                             config.get("controller.quota.window.size.seconds"))
        users, clients, user_clients, ips = await loop.run_in_executor(None, _quota_entity_configs, zk)
        for user, user_config in users.items():
            credentials.update_user(user, user_config)
            quotas.update(user, None, user_config)
        for client_id, client_config in clients.items():
            quotas.update(None, client_id, client_config)
        for (user, client_id), user_client_config in user_clients.items():
            quotas.update(user, client_id, user_client_config)
        auth = AuthHelper(await self._start_authorizer(zk))
        tokens = DelegationTokenManager(config, zk)
        await loop.run_in_executor(None, tokens.startup)  # tokens can log in from the first connection
        credentials.delegation_tokens = tokens if tokens.enabled else None
        # The socket server makes the channel (SocketServer treats an empty given channel as absent).
        self.socket_server = SocketServer(config, api_versions=api_versions, credentials=credentials)
        for ip, ip_config in ips.items():
            self._on_ip_quota(ip, ip_config)
        request_channel = self.socket_server.request_channel
        request_channel.response_hook = quotas.on_response
        if config.get("metrics.prometheus.listener"):
            request_channel.metrics = RequestMetrics()
        pool = KafkaRequestHandlerPool(request_channel, KafkaApis(self), config.num_io_threads)
        metadata_cache = MetadataCache(broker_id)
        replica_manager = ReplicaManager(broker_id, log_manager, metadata_cache, pool.run_blocking,
                                         config.inter_broker_listener_name)
        # A log dir failure is reported on whichever thread hit it; it is handled on the loop.
        log_manager.failure_channel.set_handler(lambda log_dir: loop.call_soon_threadsafe(
            loop.create_task, replica_manager.handle_log_dir_failure(log_dir)))
        replica_manager.propagate_log_dir_event = lambda: loop.run_in_executor(
            None, zk.propagate_log_dir_event, broker_id)
        broker_configs = await loop.run_in_executor(None, _broker_entity_configs, zk, broker_id)
        self._start_replication(replica_manager, broker_id, topic_configs, broker_configs)
        controller = KafkaController(zk, broker_id, ControllerConfig(
            delete_topic_enable=config.delete_topic_enable,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_seconds=config.leader_imbalance_check_interval_seconds,
            inter_broker_listener_name=config.inter_broker_listener_name,
            controller_socket_timeout_ms=config.get("controller.socket.timeout.ms"),
            connect=self.client_security.connect_blocking,
        ))
        self.services = BrokerServices(
            config=config, broker_id=broker_id, cluster_id=cluster_id, log_manager=log_manager,
            replica_manager=replica_manager, metadata_cache=metadata_cache, zk=zk, admin_zk=AdminZkClient(zk),
            controller=controller, request_channel=request_channel, pool=pool,
            producer_id_manager=ProducerIdManager(lambda: allocate_producer_id_block(zk, broker_id)),
            config_repository=ConfigRepository(zk), epoch_fence=ControllerEpochFence(),
            api_version_manager=api_versions,
            fetch_session_cache=FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots")),
            auth=auth, quotas=quotas, delegation_tokens=tokens,
        )
        if tokens.enabled:
            self._token_expiry = loop.create_task(self._expire_tokens_periodically(tokens), name="delete-expired-tokens")
        add_partitions = AddPartitionsToTxnManager(
            broker_id, metadata_cache, config.inter_broker_listener_name,
            config.transaction_state_log_num_partitions, config.get("request.timeout.ms") / 1000,
            self.client_security)
        replica_manager.add_partitions_to_txn_manager = add_partitions
        self.services.add_partitions_to_txn_manager = add_partitions
        group_coordinator = GroupCoordinator(broker_id, GroupConfig.from_broker_config(config), replica_manager,
                                             metadata_cache, pool.run_blocking)
        replica_manager.leadership_listeners.append(group_coordinator.on_leadership_change)
        self.services.group_coordinator = group_coordinator
        group_configs = self.services.group_configs = GroupConfigManager(config)
        for group_id, props in (await loop.run_in_executor(None, zk.get_all_entity_configs, "groups")).items():
            group_configs.update(group_id, props)
        if "consumer" in config.get("group.coordinator.rebalance.protocols"):
            self.services.consumer_group_coordinator = ConsumerGroupCoordinator(
                group_coordinator, ConsumerGroupConfig.from_broker_config(config), metadata_cache, group_configs)
        group_coordinator.startup()
        transaction_coordinator = TransactionCoordinator(
            broker_id, TransactionConfig.from_broker_config(config), replica_manager, metadata_cache,
            pool.run_blocking, self._producer_id_generator(self.services), config.inter_broker_listener_name,
            security=self.client_security)
        replica_manager.leadership_listeners.append(transaction_coordinator.on_leadership_change)
        self.services.transaction_coordinator = transaction_coordinator
        transaction_coordinator.startup()
        if config.get("group.share.enable"):
            self.services.share = build_share_services(config, replica_manager, metadata_cache, group_coordinator,
                                                       self.services.admin_zk, pool.run_blocking, self.client_security,
                                                       group_configs)
            replica_manager.leadership_listeners += [self.services.share.partitions.on_leadership_change,
                                                     self.services.share.state.on_leadership_change]
            self.services.share.startup()
            if self.services.consumer_group_coordinator is not None:  # a group id is of one kind only
                share_groups = self.services.share.coordinator.groups
                self.services.consumer_group_coordinator.is_share_group = share_groups.__contains__
        # The dynamic configs from ZooKeeper before the listeners open (a dynamic keystore is served from the start).
        await loop.run_in_executor(None, dynamic_broker_config.install, self.services, self._ssl_factories())
        # The finalized features too: ApiVersions answers them from the first request.
        self.feature_listener = FinalizedFeatureChangeListener(zk, api_versions.set_finalized_features)
        await loop.run_in_executor(None, self.feature_listener.start)
        await self.socket_server.start()
        pool.start()
        self._start_metrics_endpoint(self.services, pool)

        self.registration = BrokerRegistration(zk, self._broker_info(broker_id), self._on_broker_epoch)
        await loop.run_in_executor(None, self.registration.register)
        await loop.run_in_executor(None, controller.startup)
        self._controller_started = True
        self.config_listener = ConfigChangeListener(zk, self._on_config_change)
        await loop.run_in_executor(None, self.config_listener.start)
        log_manager.start_scheduler()
        log.info("[KafkaServer id=%d] started", broker_id)

    def _start_metrics_endpoint(self, services: BrokerServices, pool: KafkaRequestHandlerPool) -> None:
        """metrics.prometheus.listener: serve /metrics (nothing when empty)."""
        listener = self.config.get("metrics.prometheus.listener")
        if not listener:
            return
        assert self.socket_server is not None
        host, port = parse_http_listener("metrics.prometheus.listener", listener)
        loop_idle = LoopIdleMeter()
        loop_idle.start()
        endpoint = PrometheusEndpoint(
            host, port, KafkaMetrics(services, self.socket_server, pool, loop_idle),
            ConsumerLag(services, self.client_security, self.config.get("request.timeout.ms") / 1000))
        try:
            endpoint.start()
        except OSError:
            loop_idle.stop()
            raise
        self.metrics_endpoint = endpoint

    async def _start_authorizer(self, zk: KafkaZkClient) -> AclAuthorizer | None:
        """authorizer.class.name: the ZooKeeper-mode AclAuthorizer, loaded before requests are served."""
        name = self.config.get("authorizer.class.name")
        if not name:
            return None
        if name != ACL_AUTHORIZER_CLASS:
            raise ConfigError("authorizer.class.name", f"Class {name} cannot be found (a ZooKeeper-mode broker "
                                                       f"supports {ACL_AUTHORIZER_CLASS})")
        try:
            super_users = parse_super_users(self.config.get("super.users"))
        except ValueError as exc:
            raise ConfigError("super.users", str(exc)) from None
        authorizer = AclAuthorizer(zk, super_users, self.config.get("allow.everyone.if.no.acl.found"))
        await asyncio.get_running_loop().run_in_executor(None, authorizer.start)
        self.authorizer = authorizer
        return authorizer

    @staticmethod
    def _producer_id_generator(services: BrokerServices) -> Callable[[], Awaitable[int]]:
        """New producer ids for the transaction coordinator: a block claim in ZooKeeper runs off the loop.

        Without a block to hand ids from (ZooKeeper unreachable, a claim that failed), the answer is
        COORDINATOR_LOAD_IN_PROGRESS, as Kafka 3.9's RPCProducerIdManager gives until it has one:
        clients retry it, where the Java producer takes UNKNOWN_SERVER_ERROR as fatal."""
        async def generate() -> int:
            try:
                return await services.pool.run_blocking(services.producer_id_manager.generate_producer_id)
            except CoordinationError as exc:
                log.warning("No producer id block to hand out ids from: %s", exc)
                raise KafkaApiError(Errors.COORDINATOR_LOAD_IN_PROGRESS, str(exc)) from exc
        return generate

    def _start_replication(self, replica_manager: ReplicaManager, broker_id: int,
                           topic_configs: dict[str, dict[str, str]], broker_configs: dict[str, dict[str, str]]
                           ) -> None:
        """Replica fetchers, the AlterPartition sender, the ISR expiration check and the quotas."""
        config = self.config
        quotas = self.replication_quotas = ReplicationQuotas(
            broker_id, (config.get("replication.quota.window.num"), config.get("replication.quota.window.size.seconds")),
            (config.get("alter.log.dirs.replication.quota.window.num"),
             config.get("alter.log.dirs.replication.quota.window.size.seconds")))
        for topic, props in topic_configs.items():
            quotas.on_topic_config(topic, props)
        for entity, props in broker_configs.items():
            quotas.on_broker_config(entity, props)
        replica_manager.leader_quota = quotas.leader
        replica_manager.fetcher_manager = ReplicaFetcherManager(FetcherConfig(
            broker_id=broker_id,
            max_wait_ms=config.get("replica.fetch.wait.max.ms"),
            min_bytes=config.get("replica.fetch.min.bytes"),
            response_max_bytes=config.get("replica.fetch.response.max.bytes"),
            partition_max_bytes=config.get("replica.fetch.max.bytes"),
            backoff_ms=config.get("replica.fetch.backoff.ms"),
            socket_timeout_ms=config.get("replica.socket.timeout.ms"),
            security=self.client_security,
            broker_epoch=lambda: replica_manager.broker_epoch,
            replication_bytes_in=replica_manager.topic_stats.mark_replication_bytes_in,
        ), config.get("num.replica.fetchers"), replica_manager.run_blocking, quotas.follower)
        alter_partition = AlterPartitionManager(
            broker_id, lambda: replica_manager.broker_epoch, replica_manager.metadata_cache,
            config.inter_broker_listener_name, config.get("controller.socket.timeout.ms") / 1000,
            replica_manager.on_isr_changed, self.client_security)
        alter_partition.start()
        replica_manager.alter_partition_manager = alter_partition
        replica_manager.alter_log_dirs_manager = ReplicaAlterLogDirsManager(
            replica_manager.log_manager, replica_manager.run_blocking, config.get("replica.fetch.max.bytes"),
            config.get("replica.fetch.backoff.ms"), quotas.alter_log_dirs,
            config.get("num.replica.alter.log.dirs.threads") or len(config.log_dirs))
        self._isr_expiration = asyncio.get_running_loop().create_task(
            replica_manager.run_isr_expiration(config.get("replica.lag.time.max.ms")), name="isr-expiration")

    async def _expire_tokens_periodically(self, tokens: DelegationTokenManager) -> None:
        """Kafka's delete-expired-tokens task, every delegation.token.expiry.check.interval.ms."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tokens.check_interval_ms / 1000)
            try:
                await loop.run_in_executor(None, tokens.expire_tokens)
            except Exception:  # noqa: BLE001 - the task must outlive one failed round, as Kafka's scheduler does
                log.exception("Uncaught exception in scheduled task 'delete-expired-tokens'")

    async def _stop_replication(self, replica_manager: ReplicaManager) -> None:
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
            await asyncio.gather(self._isr_expiration, return_exceptions=True)
        if replica_manager.fetcher_manager is not None:
            await replica_manager.fetcher_manager.shutdown()
        if replica_manager.alter_partition_manager is not None:
            await replica_manager.alter_partition_manager.shutdown()
        if replica_manager.alter_log_dirs_manager is not None:
            await replica_manager.alter_log_dirs_manager.shutdown()

    def _resolve_broker_id(self, zk: KafkaZkClient, stored: dict[str, Any]) -> int:
        """broker.id, else the id in meta.properties, else a generated one (broker.id.generation.enable)."""
        configured = self.config.broker_id
        ids = {m.broker_id for m in stored.values() if m is not None and m.broker_id is not None}
        if len(ids) > 1:
            raise RuntimeError(f"log dirs disagree on broker.id: {sorted(ids)}")
        if configured >= 0:
            return configured
        if ids:
            return ids.pop()
        return zk.generate_broker_id(self.config.reserved_broker_max_id)

    def _ssl_factories(self) -> dict[str, list[SslFactory]]:
        """Each SSL listener's SslFactories: its server side, and for the inter-broker listener this
        broker's client side too (Kafka reconfigures both on a keystore update)."""
        assert self.socket_server is not None
        factories: dict[str, list[SslFactory]] = {}
        for security in self.socket_server.listener_security:
            if security.ssl is not None:
                factories.setdefault(security.endpoint.listener_name, []).append(security.ssl)
        if self.client_security.ssl is not None:
            factories.setdefault(self.config.inter_broker_listener_name, []).append(self.client_security.ssl)
        return factories

    def _broker_info(self, broker_id: int) -> BrokerInfo:
        assert self.socket_server is not None
        endpoints = []
        for ep in self.config.advertised_listeners:
            port = ep.port or self.socket_server.bound_port(ep.listener_name)
            endpoints.append(BrokerEndPoint(ep.listener_name, ep.host, port, SecurityProtocol[ep.security_protocol]))
        return BrokerInfo(broker_id, tuple(endpoints), rack=self.config.broker_rack,
                          timestamp_ms=int(time.time() * 1000))

    def _on_broker_epoch(self, epoch: int) -> None:
        # Called by the registration (startup, or the ZooKeeper thread after a new session).
        services = self.services
        assert services is not None
        services.broker_epoch = epoch
        services.replica_manager.broker_epoch = epoch

    def _on_ip_quota(self, ip: str, config: dict[str, str]) -> None:
        """/config/ips/<ip> (or <default>): the connection_creation_rate the acceptors enforce."""
        assert self.socket_server is not None
        value = config.get(CONNECTION_CREATION_RATE)
        try:
            rate = None if value is None else int(value)
        except ValueError:
            log.error("Ignoring the invalid %s quota %r of IP %s", CONNECTION_CREATION_RATE, value, ip)
            return
        self.socket_server.quotas.update_ip_connection_rate(None if ip == DEFAULT_ENTITY else ip, rate)

    def _on_config_change(self, entity_type: str, entity_name: str, config: dict[str, str]) -> None:
        if entity_type == "topics":
            log.info("Processing override for entityPath: topics/%s with config: %s", entity_name, config)
            assert self.log_manager is not None and self.replication_quotas is not None
            self.log_manager.update_topic_config(entity_name, config)
            self.replication_quotas.on_topic_config(entity_name, config)
            if config.get("unclean.leader.election.enable", "").strip().lower() == "true" \
                    and self.services is not None:
                self.services.controller.enable_topic_unclean_leader_election(entity_name)
        elif entity_type == "users" and "/clients/" in entity_name:
            assert self.quotas is not None
            user, _, client_id = entity_name.partition("/clients/")
            self.quotas.update(desanitize_entity(user), desanitize_entity(client_id), config)
        elif entity_type == "users":
            assert self.socket_server is not None and self.quotas is not None
            self.socket_server.credentials.update_user(entity_name, config)
            self.quotas.update(entity_name, None, config)
        elif entity_type == "clients":
            assert self.quotas is not None
            self.quotas.update(None, entity_name, config)
        elif entity_type == "ips":
            self._on_ip_quota(entity_name, config)
        elif entity_type == "groups":
            assert self.services is not None and self.services.group_configs is not None
            log.info("Processing override for entityPath: groups/%s with config: %s", entity_name, config)
            self.services.group_configs.update(entity_name, config)
        elif entity_type == "brokers":
            assert self.services is not None and self.replication_quotas is not None
            dynamic_broker_config.on_broker_config_change(self.services, entity_name, config)
            self.replication_quotas.on_broker_config(entity_name, config)

    def bound_port(self, listener_name: str = "PLAINTEXT") -> int:
        assert self.socket_server is not None
        return self.socket_server.bound_port(listener_name)

    # --- shutdown -----------------------------------------------------------------------------
    async def shutdown(self) -> None:
        if self._shutdown_started:
            return
        self._shutdown_started = True
        services = self.services
        loop = asyncio.get_running_loop()
        if services is None:
            return
        log.info("[KafkaServer id=%d] shutting down", services.broker_id)
        if self.config.controlled_shutdown_enable:
            await loop.run_in_executor(None, self._controlled_shutdown)
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        if self.socket_server is not None:
            self.socket_server.shutdown()
        await self._stop_replication(services.replica_manager)  # before the pool its appends run on
        if services.add_partitions_to_txn_manager is not None:
            await services.add_partitions_to_txn_manager.shutdown()
        if services.transaction_coordinator is not None:  # its background appends use the pool too
            await services.transaction_coordinator.shutdown()
        await services.pool.shutdown()
        if services.group_coordinator is not None:
            services.group_coordinator.shutdown()
        if services.share is not None:
            services.share.shutdown()
        services.replica_manager.shutdown()
        if self.config_listener is not None:
            await loop.run_in_executor(None, self.config_listener.close)
        if self.feature_listener is not None:
            await loop.run_in_executor(None, self.feature_listener.close)
        if self._token_expiry is not None:
            self._token_expiry.cancel()
            await asyncio.gather(self._token_expiry, return_exceptions=True)
        if services.delegation_tokens is not None:
            await loop.run_in_executor(None, services.delegation_tokens.shutdown)
        if self.authorizer is not None:
            await loop.run_in_executor(None, self.authorizer.close)
        await loop.run_in_executor(None, services.log_manager.shutdown)
        await loop.run_in_executor(None, services.controller.shutdown)
        if self.registration is not None:
            self.registration.close()
        await loop.run_in_executor(None, services.zk.close)
        log.info("[KafkaServer id=%d] shut down completed", services.broker_id)

    def _close_partial(self, zk: KafkaZkClient) -> None:
        """Undo a failed startup (blocking part) so the process can exit cleanly."""
        if self.authorizer is not None:
            self.authorizer.close()
        if self.services is not None and self._controller_started:
            self.services.controller.shutdown()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        zk.close()

    def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away, retrying as controlled.shutdown.max.retries says."""
        services = self.services
        assert services is not None
        retries = self.config.get("controlled.shutdown.max.retries")
        backoff_s = self.config.get("controlled.shutdown.retry.backoff.ms") / 1000
        for attempt in range(retries + 1):
            try:
                error, remaining = self._send_controlled_shutdown()
            except (OSError, ValueError, CoordinationError) as exc:  # ValueError covers ProtocolError
                log.warning("Error during controlled shutdown, possibly because leader movement took longer "
                            "than the configured controller.socket.timeout.ms: %s", exc)
            else:
                if error == Errors.NONE and not remaining:
                    log.info("Controlled shutdown request returned successfully")
                    return
                log.info("Remaining partitions to move: %s; controller error %s", remaining, error.name)
            if attempt < retries:
                log.info("Retrying controlled shutdown after the previous attempt failed...")
                time.sleep(backoff_s)
        log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")

    def _send_controlled_shutdown(self) -> tuple[Errors, list[str]]:
        services = self.services
        assert services is not None
        controller_id = services.zk.get_controller_id()
        if controller_id is None:
            raise ValueError("no controller is elected")
        info = services.zk.get_broker_info(controller_id)
        endpoint = info.endpoint(self.config.inter_broker_listener_name) if info else None
        if endpoint is None:
            raise ValueError(f"controller {controller_id} has no {self.config.inter_broker_listener_name} endpoint")
        request = ControlledShutdownRequest(broker_id=services.broker_id, broker_epoch=services.broker_epoch)
        timeout = self.config.get("controller.socket.timeout.ms") / 1000
        response = send_request(endpoint.host or "localhost", endpoint.port, request, ApiKey.CONTROLLED_SHUTDOWN,
                                CONTROLLED_SHUTDOWN_VERSION, f"broker-{services.broker_id}-controlled-shutdown",
                                timeout, self.client_security.connect_blocking)
        remaining = [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions]
        return Errors(response.error_code), remaining


def _broker_entity_configs(zk: KafkaZkClient, broker_id: int) -> dict[str, dict[str, str]]:
    return {entity: zk.get_entity_config("brokers", entity) for entity in (DEFAULT_ENTITY, str(broker_id))}


def _quota_entity_configs(zk: KafkaZkClient) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]],
                                                       dict[tuple[str, str], dict[str, str]], dict[str, dict[str, str]]]:
    """/config/users, /config/clients, /config/users/<user>/clients (desanitized names) and /config/ips."""
    return (zk.get_all_entity_configs("users"), zk.get_all_entity_configs("clients"),
            zk.get_all_user_client_configs(), zk.get_all_entity_configs("ips"))


def _all_topic_configs(zk: KafkaZkClient) -> dict[str, dict[str, str]]:
    return {topic: zk.get_entity_config("topics", topic) for topic in zk.get_all_topics()}
