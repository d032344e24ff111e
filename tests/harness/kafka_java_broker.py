"""Real Apache Kafka 3.9 brokers (ZooKeeper mode, from ``../shared/kafka-cli/``) for integration
tests that put Kafka beside our broker: the same tool against both, or both in one cluster.

``KafkaJavaBroker`` is a ``BrokerProcess`` whose process is ``bin/kafka-server-start.sh`` on the
same generated server.properties (free port, own log dir, the test's ZooKeeper chroot), with a
bounded heap and Kafka's own log4j files under the broker's directory. ``kafka_java_broker()``
skips the calling test, saying why, when Kafka or Java is absent.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KAFKA_CLI, kafka_cli_unavailable_reason

KAFKA_HEAP_OPTS = "-Xmx512m"
START_TIMEOUT_S = 90.0  # a JVM on a busy two-core machine


class KafkaJavaBroker(BrokerProcess):
    """Kafka's own broker, started, probed and stopped like ours (``start()``, ``stop()``, ``kill()``,
    ``bootstrap``, ``broker_id``, ``log_tail()``); ``log_path`` is its stdout, ``kafka_log_dir`` holds
    server.log, controller.log and state-change.log."""

    dir_prefix = "kafka"

    def __init__(self, zk_connect: str, broker_id: int, tmp_dir: Path | str,
                 overrides: Mapping[str, str] | None = None, port: int | None = None) -> None:
        super().__init__(zk_connect, broker_id, tmp_dir, overrides, port)
        self.kafka_log_dir = self.dir / "logs"

    def command(self) -> list[str]:
        return [str(KAFKA_CLI / "bin" / "kafka-server-start.sh"), str(self.config_path)]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"KAFKA_HEAP_OPTS": KAFKA_HEAP_OPTS, "LOG_DIR": str(self.kafka_log_dir)})
        return env

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        super().start(timeout)

    def __repr__(self) -> str:
        return f"KafkaJavaBroker(id={self.broker_id}, {self.bootstrap})"


def kafka_java_broker(zk_connect: str, broker_id: int, tmp_dir: Path | str,
                      overrides: Mapping[str, str] | None = None) -> KafkaJavaBroker:
    """A (not yet started) Kafka broker for a test, or a skip naming what is missing."""
    import pytest

    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return KafkaJavaBroker(zk_connect, broker_id, tmp_dir, overrides)
