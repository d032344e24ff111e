"""Real Apache Kafka 3.9 brokers (ZooKeeper mode, from ``../shared/kafka-cli/``) for tests that put
Kafka beside our broker, e.g. on the same log dir.

``KafkaBroker`` is a ``BrokerProcess`` that runs ``bin/kafka-server-start.sh`` instead of our broker:
same server.properties, ZooKeeper chroot, free port and readiness checks; its own log dir for
Kafka's log4j files (``LOG_DIR``), ``KAFKA_HEAP_OPTS=-Xmx512m``. ``kafka_broker_or_skip()`` skips
the test, saying why, when Java or the distribution is absent.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KAFKA_CLI, kafka_cli_unavailable_reason


class KafkaBroker(BrokerProcess):
    def __init__(self, zk_connect: str, broker_id: int, tmp_dir: Path | str,
                 overrides: Mapping[str, str] | None = None, log_dir: Path | None = None, **placement: Any) -> None:
        """``placement``: BrokerProcess's ``port``, ``host`` and ``command_prefix``."""
        super().__init__(zk_connect, broker_id, tmp_dir, overrides, **placement)
        self.dir = Path(tmp_dir) / f"kafka-{broker_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir or self.dir / "kafka-logs"
        self.log_path = self.dir / "server.out"
        self.config_path = self.dir / "server.properties"
        self.log4j_dir = self.dir / "logs"

    def command(self) -> list[str]:
        return [str(KAFKA_CLI / "bin" / "kafka-server-start.sh"), str(self.config_path)]

    def env(self) -> dict[str, str]:
        return dict(os.environ, LOG_DIR=str(self.log4j_dir), KAFKA_HEAP_OPTS="-Xmx512m")

    def start(self, timeout: float = 90.0) -> None:
        super().start(timeout)

    def cleaner_log(self) -> str:
        path = self.log4j_dir / "log-cleaner.log"
        return path.read_text(errors="replace") if path.exists() else ""


def kafka_broker_or_skip() -> None:
    import pytest

    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)
