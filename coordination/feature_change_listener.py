"""FinalizedFeatureChangeListener: every broker follows /feature (Kafka's, KIP-584).

The finalized features and their epoch (the znode's zkVersion; -1 while it is absent) are what
ApiVersions answers. The znode is re-read, and watched again, on a thread of its own each time its
watch fires and after every reconnect.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from coordination.errors import MalformedZnodeError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_admin_data import FEATURE_STATUS_ENABLED, decode_feature_znode
from coordination.zk_data import FEATURE_PATH
from coordination.zk_event_thread import ZkEventThread

log = logging.getLogger(__name__)

FeaturesCallback = Callable[[int, dict[str, int]], None]


class FinalizedFeatureChangeListener:
    """Calls ``on_change(epoch, finalized features)`` with each new value of /feature."""

    def __init__(self, zk_client: KafkaZkClient, on_change: FeaturesCallback) -> None:
        self.zk = zk_client
        self._on_change = on_change
        self._events = ZkEventThread("feature-zk-node-event-process-thread", self.update, FEATURE_PATH)

    def start(self) -> None:
        """Reads /feature once before returning (ApiVersions is right from the first request)."""
        self.zk.zk.register_znode_handler(FEATURE_PATH, lambda _path: self._events.wake())
        self.update()
        self._events.start()

    def close(self) -> None:
        self.zk.zk.unregister_znode_handler(FEATURE_PATH)
        self._events.close()

    def update(self) -> None:
        data, stat = self.zk.zk.get_data(FEATURE_PATH, watch=True)  # absent: its creation is watched
        if stat is None:
            self._on_change(-1, {})
            return
        try:
            status, features = decode_feature_znode(data)
        except MalformedZnodeError as exc:
            log.error("ignoring /feature: %s", exc)
            return
        log.info("Feature ZK node at path: %s updated (epoch %d): %s", FEATURE_PATH, stat.version, features)
        self._on_change(stat.version, features if status == FEATURE_STATUS_ENABLED else {})
