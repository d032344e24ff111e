"""PrometheusEndpoint: ``metrics.prometheus.listener`` (e.g. ``http://0.0.0.0:7071``) serves the
broker's metrics at ``/metrics`` in Prometheus' text format (and OpenMetrics when asked).

prometheus_client's HTTP server answers on threads of its own, so a busy event loop never leaves
a scrape unanswered at the TCP level; each scrape then hops onto the event loop to read the broker's
state there (``KafkaMetrics``, ``ConsumerLag``), so nothing on a hot path takes a lock for the
metrics' sake. A scrape that the loop cannot serve within ``SCRAPE_TIMEOUT_S`` gets an HTTP error.
The process's own CPU, memory and file descriptors come from prometheus_client's process collector.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from wsgiref.simple_server import WSGIServer

from prometheus_client import ProcessCollector, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import CollectorRegistry

from broker.metrics.consumer_lag import ConsumerLag
from broker.metrics.kafka_metrics import KafkaMetrics
from broker.metrics.mbeans import MBeanFamilies

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 10.0


class PrometheusEndpoint:
    def __init__(self, host: str, port: int, kafka_metrics: KafkaMetrics, consumer_lag: ConsumerLag) -> None:
        self.host = host or "0.0.0.0"
        self.port = port
        self.kafka_metrics = kafka_metrics
        self.consumer_lag = consumer_lag
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve (on the event loop thread; a port in use stops start-up like a listener's)."""
        self._loop = asyncio.get_running_loop()
        registry = CollectorRegistry()
        registry.register(self)
        ProcessCollector(registry=registry)
        try:
            self._server, self._thread = start_http_server(self.port, self.host, registry)
        except OSError as exc:
            raise OSError(exc.errno, f"Prometheus metrics endpoint failed to bind to http://{self.host}:{self.port}: "
                                     f"{exc.strerror}") from exc
        self.port = self._server.server_port
        log.info("Serving Prometheus metrics on http://%s:%d/metrics", self.host, self.port)

    def collect(self) -> Iterable[Metric]:
        """prometheus_client's Collector API, on an HTTP thread: the metrics, gathered on the loop."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._gather(), self._loop)
        try:
            return future.result(SCRAPE_TIMEOUT_S)
        except TimeoutError:
            future.cancel()
            log.warning("A metrics scrape timed out after %.0f s: the event loop is busy", SCRAPE_TIMEOUT_S)
            raise

    async def _gather(self) -> list[Metric]:
        families = MBeanFamilies()
        self.kafka_metrics.collect(families)
        return [*families, *await self.consumer_lag.collect()]

    async def stop(self) -> None:
        """Stop serving (the HTTP server's shutdown waits for its thread, off the loop)."""
        await asyncio.get_running_loop().run_in_executor(None, self._stop_server)
        self.kafka_metrics.loop_idle.stop()
        self.consumer_lag.close()

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
