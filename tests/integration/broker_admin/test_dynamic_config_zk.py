"""DynamicBrokerConfig.install against a real ZooKeeper: start-up state from /config/brokers."""
from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.admin.dynamic_broker_config import current_dynamic_config, install
from broker.config import KafkaConfig
from coordination.kafka_zk_client import KafkaZkClient
from storage.log_config import broker_defaults
from storage.log_manager import LogManager

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_install_applies_stored_dynamic_configs(zk_connect: str, tmp_path: Path) -> None:
    zk = KafkaZkClient.connect(zk_connect, 10000)
    log_manager = LogManager([str(tmp_path)])
    try:
        zk.create_top_level_paths()
        zk.set_or_create_entity_config("brokers", "<default>", {"log.retention.bytes": "1000", "num.io.threads": "3"})
        zk.set_or_create_entity_config("brokers", "1", {"num.io.threads": "5"})
        config = KafkaConfig({"broker.id": "1", "zookeeper.connect": zk_connect, "log.dirs": str(tmp_path)})
        log_manager.default_config = broker_defaults(config.values())
        log_manager.startup()
        topic_log = log_manager.get_or_create_log("t", 0)
        services = SimpleNamespace(config=config, broker_id=1, zk=zk, log_manager=log_manager, dynamic_config=None)
        dyn = install(services, {})  # type: ignore[arg-type]
        assert services.dynamic_config is dyn
        assert (config.num_io_threads, config.log_retention_bytes) == (5, 1000)
        assert topic_log.config.retention_bytes == 1000
        assert (dyn.per_broker, dyn.defaults) == ({"num.io.threads": "5"},
                                                  {"log.retention.bytes": "1000", "num.io.threads": "3"})
        assert dyn.static["broker.id"] == "1" and "num.io.threads" not in dyn.static

        async def live() -> object:
            return await current_dynamic_config(services)  # type: ignore[arg-type]

        assert asyncio.run(live()) is dyn
    finally:
        log_manager.shutdown()
        zk.close()
