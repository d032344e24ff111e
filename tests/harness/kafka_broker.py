"""Real Apache Kafka 3.9 brokers (ZooKeeper mode, from ``../shared/kafka-cli/``) for integration tests.

``KafkaJavaBroker`` is a ``BrokerProcess`` that runs ``bin/kafka-server-start.sh`` instead of our
broker, so tests treat both kinds alike (mixed clusters, side-by-side comparisons): a generated
server.properties on a free port, its own directory for log dirs and Kafka's log4j output (never
``../shared``), a small heap, and ``start()`` returning once it is registered in ZooKeeper and
answers ApiVersions. ``stop()`` is SIGTERM (Kafka's controlled shutdown), ``kill()`` SIGKILL.
``kafka_broker_or_skip()`` skips the calling test, saying why, when the tools or Java are absent.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.harness.broker import TEST_DEFAULTS, BrokerProcess
from tests.harness.kafka_cli import KAFKA_CLI, kafka_cli_unavailable_reason

# Kafka's defaults except what makes a test broker small and quick; inter.broker.protocol.version
# stays Kafka 3.9's default.
KAFKA_TEST_DEFAULTS: dict[str, str] = {
    **TEST_DEFAULTS,
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}

# One log file next to the broker's directory instead of the six of Kafka's own log4j.properties.
_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.state.change.logger=INFO
"""

# Kafka's request log: every request with its header and body, as JSON, in a file of its own.
_REQUEST_LOG4J = """\
log4j.logger.kafka.request.logger=DEBUG, requests
log4j.additivity.kafka.request.logger=false
log4j.appender.requests=org.apache.log4j.FileAppender
log4j.appender.requests.File={path}
log4j.appender.requests.layout=org.apache.log4j.PatternLayout
log4j.appender.requests.layout.ConversionPattern=%m%n
"""
_COMPLETED = "Completed request:"

# Serial GC and the client compiler: a test broker's load is small, its start-up matters.
TEST_JVM_PERFORMANCE_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"
# kafka-run-class.sh's own, for measuring Kafka as it is deployed (benchmarks).
KAFKA_JVM_PERFORMANCE_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
                              "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")


class KafkaJavaBroker(BrokerProcess):
    """A ZooKeeper-mode Kafka 3.9 broker with ``BrokerProcess``'s interface."""

    DIR_PREFIX = "kafka"
    LOG_NAME = "server.log"

    def __init__(self, zk_connect: str, broker_id: int, tmp_dir: Path | str,
                 overrides: Mapping[str, str] | None = None, port: int | None = None,
                 heap: str = "-Xmx512m -Xms128m", request_log: bool = False, log_dir: Path | None = None,
                 jvm_performance_opts: str = TEST_JVM_PERFORMANCE_OPTS, **placement: Any) -> None:
        """``log_dir``: serve an existing log dir (e.g. one our broker wrote); ``jvm_performance_opts``:
        ``KAFKA_JVM_PERFORMANCE_OPTS`` to run the JVM as Kafka ships it; ``placement``:
        BrokerProcess's ``host`` and ``command_prefix``."""
        super().__init__(zk_connect, broker_id, tmp_dir, overrides, port, **placement)
        if log_dir is not None:
            self.log_dir = log_dir
        self.heap = heap
        self.jvm_performance_opts = jvm_performance_opts
        self.request_log_path = self.dir / "requests.log" if request_log else None

    def properties(self) -> dict[str, str]:
        return {**super().properties(), **KAFKA_TEST_DEFAULTS, **self.overrides}

    def start(self, timeout: float = 90.0) -> None:
        super().start(timeout)

    def command(self) -> list[str]:
        log4j = self.dir / "log4j.properties"
        text = _LOG4J.format(path=self.log_path)
        if self.request_log_path is not None:
            text += _REQUEST_LOG4J.format(path=self.request_log_path)
        log4j.write_text(text)
        return [str(KAFKA_CLI / "bin" / "kafka-server-start.sh"), str(self.config_path)]

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KAFKA_HEAP_OPTS": self.heap,
            "KAFKA_JVM_PERFORMANCE_OPTS": self.jvm_performance_opts,
            "KAFKA_LOG4J_OPTS": f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}",
            "LOG_DIR": str(self.dir / "jvm-logs"),
            "EXTRA_ARGS": "-name kafkaServer",  # no -loggc: no GC log files
            **self.extra_env,
        }

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (Kafka's shutdown hook: controlled shutdown, clean-shutdown marker); 0 when clean.

        The JVM exits with 143 (128 + SIGTERM) after its shutdown hooks ran; that is Kafka's clean stop.
        """
        code = super().stop(timeout)
        return 0 if code == 143 else code

    def received_requests(self) -> list[dict[str, Any]]:
        """Every request this broker answered so far (with ``request_log``), as Kafka logs it: the
        ``requestHeader`` (api key name, version, client id) and the ``request`` body in JSON."""
        assert self.request_log_path is not None, "start the broker with request_log=True"
        if not self.request_log_path.exists():
            return []
        lines = self.request_log_path.read_text(errors="replace").splitlines()
        return [json.loads(line[len(_COMPLETED):]) for line in lines if line.startswith(_COMPLETED)]

    def cleaner_log(self) -> str:
        """The broker's log, where the cleaner writes its per-cleaning statistics (multi-line entries)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __repr__(self) -> str:
        return f"KafkaJavaBroker(id={self.broker_id}, {self.bootstrap})"


def kafka_broker_or_skip() -> None:
    import pytest

    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)
