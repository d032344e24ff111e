"""The Grafana dashboard of ops/grafana: every PromQL expression in it parses (``promtool check
rules`` on a recording rule per expression), and, with a real Prometheus scraping a real broker
that served producers and a classic and a KIP-848 consumer group, every expression evaluates and
names only metrics the broker exports. No Grafana here: the JSON is what Grafana imports."""
from __future__ import annotations

import json
import re
import subprocess
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.prometheus import REPO_ROOT, PrometheusServer, promtool
from tests.harness.waiting import wait_for
from tests.integration.metrics.conftest import MeteredCluster, metered_cluster

pytestmark = pytest.mark.integration

DASHBOARD = REPO_ROOT / "ops" / "grafana" / "kafka-broker.json"
# Grafana's variables, as Grafana substitutes them: the range interval and "All" brokers.
VARIABLES = {"$__rate_interval": "1m", "$instance": ".*"}
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def expressions() -> list[str]:
    """Every query of the dashboard (panels' targets and the variables'), as Prometheus receives it."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    found += [re.fullmatch(r"label_values\((\w+), \w+\)", v["definition"]).group(1) + "{}"
              for v in dashboard["templating"]["list"] if v["type"] == "query"]
    concrete = []
    for expr in found:
        for variable, value in VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, expr
        concrete.append(expr)
    return concrete


def test_every_expression_parses(tmp_path: Path) -> None:
    binary = promtool()
    assert binary is not None, "promtool is missing (Debian's prometheus package; scripts/bootstrap.sh installs it)"
    exprs = expressions()
    assert len(exprs) > 40
    rules = tmp_path / "dashboard-rules.yml"
    rules.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": [  # JSON is YAML
        {"record": f"dashboard:expr{i}", "expr": expr} for i, expr in enumerate(exprs)]}]}))
    done = subprocess.run([binary, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout


@pytest.fixture
def cluster(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MeteredCluster]:
    yield from metered_cluster(1, zk_connect, tmp_path / "brokers", request)


def _traffic(bootstrap: str) -> None:
    """Records produced, then read and committed by a classic and a KIP-848 consumer group."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("dashboard", 2, 1)])["dashboard"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(200):
        producer.produce("dashboard", key=str(i % 7), value=b"x" * 100)
    assert producer.flush(30) == 0
    for protocol in ("classic", "consumer"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dashboard-{protocol}",
                             "group.protocol": protocol, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["dashboard"])
        read = 0
        while read < 100:
            message = consumer.poll(10)
            assert message is not None, f"{protocol} group read {read} records"
            assert message.error() is None, message.error()
            read += 1
        consumer.commit(asynchronous=False)
        consumer.close()


def test_every_expression_reads_what_a_broker_exports(cluster: MeteredCluster, tmp_path: Path) -> None:
    assert promtool() is not None, \
        "prometheus is missing (Debian's prometheus package; scripts/bootstrap.sh installs it)"
    _traffic(cluster.bootstrap)
    exported = {name for name, _ in cluster.scrape(0)}
    exprs = expressions()
    named = {expr: SELECTOR.findall(expr) for expr in exprs}
    assert all(named.values()), [expr for expr, names in named.items() if not names]
    assert sorted({n for names in named.values() for n in names} - exported) == []

    prometheus = PrometheusServer(tmp_path / "prometheus", cluster.metrics_targets, rule_files=())
    prometheus.start()
    try:
        def answer(expr: str) -> list[dict]:
            try:
                return prometheus.api("query", query=expr)["result"]
            except urllib.error.HTTPError as refused:
                raise AssertionError(f"Prometheus refused {expr}: {refused.read().decode()}") from None

        # Two scrapes after the traffic, so that rates have their two samples.
        wait_for(lambda: answer('count_over_time(kafka_consumergroup_lag_sum{consumergroup="dashboard-consumer"}[1m]) >= 2'),
                 "Prometheus to have scraped the groups' lag twice", timeout=60, interval=0.5)
        results = {expr: answer(expr) for expr in exprs}
    finally:
        prometheus.stop()

    def labels(fragment: str, label: str) -> set[str]:
        expr = next(e for e in exprs if fragment in e)
        return {series["metric"].get(label, "") for series in results[expr]}

    assert labels("bytesin_total", "instance") == set(cluster.metrics_targets)
    assert labels("kafka_consumergroup_lag_sum", "consumergroup") == {"dashboard-classic", "dashboard-consumer"}
    assert {"JoinGroup", "SyncGroup", "ConsumerGroupHeartbeat", "OffsetCommit"} <= labels('request=~"JoinGroup', "request")
    running = next(e for e in exprs if e.startswith("count(kafka_server_kafkaserver_brokerstate"))
    assert [series["value"][1] for series in results[running]] == ["1"]
