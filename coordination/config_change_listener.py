"""Dynamic config changes, applied by every broker without restart (Kafka's ZkConfigManager over
ZkNodeChangeNotificationListener).

Writers update /config/<type>/<name> and add a sequential /config/changes/config_change_<seq>
node. This listener watches /config/changes, handles every notification newer than the last one
it processed (all of them after a restart: they only say "re-read X"), hands the entity's full
current config to `on_change`, and purges notifications older than 15 minutes.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from coordination.errors import CoordinationError, MalformedZnodeError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_admin_data import CONFIG_CHANGE_PREFIX, decode_config_change, decode_entity_config, desanitize
from coordination.zk_data import CONFIG_CHANGES_PATH, CONFIG_PATH

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
ConfigChangeCallback = Callable[[str, str, dict[str, str]], None]


def notification_sequence(child: str) -> int | None:
    if not child.startswith(CONFIG_CHANGE_PREFIX):
        return None
    digits = child[len(CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isdigit() else None


class ConfigChangeListener:
    """`on_change(entity_type, entity_name, config)`; entity_name is the raw (desanitized) name,
    or the nested path such as `alice/clients/app1` for user+client quotas."""

    def __init__(
        self,
        zk_client: KafkaZkClient,
        on_change: ConfigChangeCallback,
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.zk = zk_client
        self._on_change = on_change
        self._expiry_ms = expiry_ms
        self._clock_ms = clock_ms
        self.last_executed_change = -1
        self._wakeups: queue.Queue[bool] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="config-change-listener", daemon=True)

    def start(self) -> None:
        self.zk.zk.register_child_handler(CONFIG_CHANGES_PATH, lambda _path: self._wakeups.put(True))
        self._thread.start()
        self._wakeups.put(True)

    def close(self) -> None:
        self.zk.zk.unregister_child_handler(CONFIG_CHANGES_PATH)
        self._wakeups.put(False)
        if self._thread.is_alive():
            self._thread.join(10)

    def _run(self) -> None:
        while self._wakeups.get():
            try:
                self.process_notifications()
            except CoordinationError as exc:
                log.warning("config change notifications not processed now (%s); will retry on the next event", exc)

    def process_notifications(self) -> None:
        children = self.zk.get_children(CONFIG_CHANGES_PATH, watch=True)
        numbered = sorted((seq, child) for child in children if (seq := notification_sequence(child)) is not None)
        for seq, child in numbered:
            if seq <= self.last_executed_change:
                continue
            path = f"{CONFIG_CHANGES_PATH}/{child}"
            data, stat = self.zk.zk.get_data(path)
            if stat is not None:
                self._process_one(path, data)
            self.last_executed_change = seq
        self._purge_obsolete(numbered)

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

    def _purge_obsolete(self, numbered: list[tuple[int, str]]) -> None:
        now = self._clock_ms()
        for _, child in numbered:
            path = f"{CONFIG_CHANGES_PATH}/{child}"
            stat = self.zk.zk.exists(path)
            if stat is not None and now - stat.ctime > self._expiry_ms:
                try:
                    self.zk.zk.delete(path)
                except (NoNodeError, CoordinationError) as exc:  # gone already, or ZooKeeper trouble
                    log.debug("could not purge %s: %r", path, exc)
