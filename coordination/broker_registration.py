"""A broker's identity in ZooKeeper: the cluster id check and the ephemeral registration that is
re-created on every new session (the broker epoch changes with it)."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from coordination.errors import InconsistentClusterIdError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import BrokerInfo, random_uuid_b64

log = logging.getLogger(__name__)


def get_or_create_cluster_id(zk_client: KafkaZkClient) -> str:
    """The cluster id from /cluster/id, created (once, by whoever is first) when missing."""
    return zk_client.create_or_get_cluster_id(random_uuid_b64())


def check_cluster_id(cluster_id: str, stored_cluster_ids: Mapping[str, str | None]) -> None:
    """Stop the broker if a log dir's meta.properties (log dir -> cluster.id, None when the file is
    new) names another cluster: the broker would join the wrong cluster."""
    for log_dir, stored in stored_cluster_ids.items():
        if stored is not None and stored != cluster_id:
            raise InconsistentClusterIdError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored} in "
                f"meta.properties of log dir {log_dir}. The broker is trying to join the wrong "
                f"cluster. Configured zookeeper.connect may be wrong."
            )


class BrokerRegistration:
    """Keeps /brokers/ids/<id> present for this broker's lifetime.

    `on_epoch_change(epoch)` is called after each (re-)registration so the broker can put the new
    broker epoch into ControlledShutdown and AlterPartition requests.
    """

    def __init__(
        self,
        zk_client: KafkaZkClient,
        info: BrokerInfo,
        on_epoch_change: Callable[[int], None] | None = None,
    ) -> None:
        self._zk_client = zk_client
        self.info = info
        self._on_epoch_change = on_epoch_change
        self._lock = threading.Lock()
        self.broker_epoch = -1
        self._handler_name = f"broker-registration-{info.broker_id}"

    def register(self) -> int:
        """Register (raises BrokerIdInUseError if another live broker has the id)."""
        with self._lock:
            self.broker_epoch = self._zk_client.register_broker(self.info)
        log.info("registered broker %d with epoch %d", self.info.broker_id, self.broker_epoch)
        self._zk_client.zk.register_session_handler(self._handler_name, self)
        if self._on_epoch_change is not None:
            self._on_epoch_change(self.broker_epoch)
        return self.broker_epoch

    def close(self) -> None:
        self._zk_client.zk.unregister_session_handler(self._handler_name)

    def on_session_expired(self) -> None:
        log.warning("broker %d lost its registration with its ZooKeeper session", self.info.broker_id)

    def on_new_session(self) -> None:
        self.register()
