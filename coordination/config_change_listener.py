"""Dynamic config changes, applied by every broker without restart (Kafka's ZkConfigManager over
ZkNodeChangeNotificationListener).

Writers update /config/<type>/<name> and add a sequential /config/changes/config_change_<seq>
node. This listener hands the entity's full current config to `on_change` for each notification
(see ``notification_listener`` for the queue's rules).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from coordination.errors import MalformedZnodeError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.notification_listener import NOTIFICATION_EXPIRY_MS, ZkNodeChangeNotificationListener
from coordination.zk_admin_data import CONFIG_CHANGE_PREFIX, decode_config_change, decode_entity_config, desanitize
from coordination.zk_data import CONFIG_CHANGES_PATH, CONFIG_PATH

log = logging.getLogger(__name__)

ConfigChangeCallback = Callable[[str, str, dict[str, str]], None]


class ConfigChangeListener(ZkNodeChangeNotificationListener):
    """`on_change(entity_type, entity_name, config)`; entity_name is the raw (desanitized) name,
    or the nested path such as `alice/clients/app1` for user+client quotas."""

    def __init__(
        self,
        zk_client: KafkaZkClient,
        on_change: ConfigChangeCallback,
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        super().__init__(zk_client, CONFIG_CHANGES_PATH, CONFIG_CHANGE_PREFIX, self._process_one, expiry_ms, clock_ms)
        self._on_change = on_change

    def _process_one(self, path: str, data: bytes | None) -> None:
        try:
            change = decode_config_change(path, data)
            entity_path = f"{CONFIG_PATH}/{change.entity_path}"
            entity_data, _ = self.zk.zk.get_data(entity_path)
            config = decode_entity_config(entity_path, entity_data)
        except MalformedZnodeError as exc:
            log.error("ignoring config change notification: %s", exc)
            return
        name = change.entity_name
        name = desanitize(name) if "/" not in name else name
        try:
            self._on_change(change.entity_type, name, config)
        except Exception:
            log.exception("applying config change of %s failed", change.entity_path)
