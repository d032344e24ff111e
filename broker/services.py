"""BrokerServices: the running components of one broker, handed to every request handler."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.fetch_session import FetchSessionCache
from broker.quota.client_quota_manager import QuotaManagers
from broker.security.authorization import NO_AUTHORIZATION, AuthHelper

if TYPE_CHECKING:
    from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from broker.admin.dynamic_broker_config import DynamicBrokerConfig
    from broker.admin.group_configs import GroupConfigManager
    from broker.security.delegation_token_manager import DelegationTokenManager
    from broker.config import KafkaConfig
    from broker.coordinator.consumer.consumer_group_coordinator import ConsumerGroupCoordinator
    from broker.coordinator.group.group_coordinator import GroupCoordinator
    from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker.metadata_cache import MetadataCache
    from broker.network.api_version_manager import ApiVersionManager
    from broker.network.request_channel import RequestChannel
    from broker.network.request_handler import KafkaRequestHandlerPool
    from broker.replica_manager import ReplicaManager
    from broker.share.share_services import ShareServices
    from coordination.admin_zk_client import AdminZkClient
    from coordination.controller.kafka_controller import KafkaController
    from coordination.controller_epoch import ControllerEpochFence
    from coordination.kafka_zk_client import KafkaZkClient
    from coordination.producer_id_manager import ProducerIdManager
    from storage.log_manager import LogManager


class ConfigRepository:
    """Topic config overrides as stored in ZooKeeper (/config/topics/<topic>)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self._zk = zk

    def topic_config(self, topic: str) -> dict[str, str]:
        """Blocking ZooKeeper read: call through ``pool.run_blocking`` from a handler."""
        return self._zk.get_entity_config("topics", topic)


@dataclass
class BrokerServices:
    config: KafkaConfig
    broker_id: int
    cluster_id: str
    log_manager: LogManager
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    zk: KafkaZkClient
    admin_zk: AdminZkClient
    controller: KafkaController
    request_channel: RequestChannel
    pool: KafkaRequestHandlerPool
    producer_id_manager: ProducerIdManager
    config_repository: ConfigRepository
    epoch_fence: ControllerEpochFence
    api_version_manager: ApiVersionManager
    fetch_session_cache: FetchSessionCache = field(default_factory=FetchSessionCache)
    # The broker's registration epoch (czxid of its /brokers/ids znode), for controller RPCs.
    broker_epoch: int = -1
    # The classic group coordinator (set at startup; None until then).
    group_coordinator: GroupCoordinator | None = None
    # KIP-848 consumer groups (None when group.coordinator.rebalance.protocols leaves out "consumer").
    consumer_group_coordinator: ConsumerGroupCoordinator | None = None
    # Share groups: membership, share sessions and share-partitions (None when group.share.enable=false).
    share: ShareServices | None = None
    # Every group's config overrides (/config/groups), set at startup.
    group_configs: GroupConfigManager | None = None
    # The transaction coordinator (set at startup; None until then).
    transaction_coordinator: TransactionCoordinator | None = None
    # The live, layered broker config (static + dynamic from ZooKeeper), set at startup.
    dynamic_config: DynamicBrokerConfig | None = None
    # KIP-890: asks transaction coordinators whether partitions are in a transaction (set at startup).
    add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = None
    # Authorization of requests (allows everything unless authorizer.class.name is set).
    auth: AuthHelper = NO_AUTHORIZATION
    # Client quotas (byte rates, request time, controller mutations).
    quotas: QuotaManagers = field(default_factory=QuotaManagers)
    # Delegation tokens: created, renewed, expired and described here; they log in through SCRAM.
    delegation_tokens: DelegationTokenManager | None = None
