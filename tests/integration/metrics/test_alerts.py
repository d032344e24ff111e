"""The alert rules of ops/prometheus: valid (``promtool check rules``), right on synthetic series
(``promtool test rules``), and fired by a real Prometheus scraping three real brokers when one of
them is killed: under-replicated and under-min-ISR partitions on the survivors, an offline
partition on the controller; all gone once the broker is back."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.prometheus import ALERT_RULE_TESTS, ALERT_RULES, PrometheusServer, promtool, total
from tests.harness.waiting import wait_for
from tests.integration.metrics.conftest import MeteredCluster, metered_cluster

pytestmark = pytest.mark.integration

FIRED_BY_A_DEAD_BROKER = {"KafkaUnderReplicatedPartitions", "KafkaUnderMinIsrPartitions", "KafkaOfflinePartitions"}


def _promtool(*args: str) -> str:
    binary = promtool()
    if binary is None:
        pytest.skip("promtool is missing (Debian's prometheus package; scripts/bootstrap.sh installs it)")
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_alert_rules_are_valid() -> None:
    assert "SUCCESS: 7 rules found" in _promtool("check", "rules", str(ALERT_RULES))


def test_alert_rules_fire_on_the_series_that_mean_trouble() -> None:
    assert "SUCCESS" in _promtool("test", "rules", str(ALERT_RULE_TESTS))


@pytest.fixture
def cluster(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MeteredCluster]:
    # Followers that stop fetching leave the ISR after two seconds rather than Kafka's thirty.
    yield from metered_cluster(3, zk_connect, tmp_path / "brokers", request, {"replica.lag.time.max.ms": "2000"})


def test_a_killed_broker_fires_the_alerts_until_it_returns(cluster: MeteredCluster, tmp_path: Path) -> None:
    if promtool() is None:
        pytest.skip("prometheus is missing (Debian's prometheus package; scripts/bootstrap.sh installs it)")
    wait_for(lambda: total(cluster.scrape_all(), "kafka_controller_kafkacontroller_activecontrollercount") == 1,
             "one active controller", timeout=30, interval=0.2)
    controller = cluster.brokers[0].metadata().controller_id
    victim = next(b.broker_id for b in cluster.brokers if b.broker_id != controller)  # not the controller
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [NewTopic("replicated", 3, 3), NewTopic("strict", 1, 3, config={"min.insync.replicas": "3"}),
              NewTopic("single", 1, replica_assignment=[[victim]])]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for topic in ("replicated", "strict", "single"):
        cluster.brokers[controller].wait_for_leaders(topic, 3 if topic == "replicated" else 1, timeout=30)

    prometheus = PrometheusServer(tmp_path / "prometheus", cluster.metrics_targets)
    try:
        prometheus.start()
        wait_for(lambda: len([t for t in prometheus.api("targets")["activeTargets"] if t["health"] == "up"]) == 3,
                 "Prometheus to scrape the three brokers", timeout=30, interval=0.5)
        assert prometheus.firing() == set()

        cluster.brokers[victim].kill()
        survivors = [b.broker_id for b in cluster.brokers if b.broker_id != victim]
        wait_for(lambda: total(cluster.scrape_all(survivors), "kafka_server_replicamanager_underreplicatedpartitions")
                 >= 4, "the survivors to report the partitions the dead broker followed", timeout=30, interval=0.5)
        wait_for(lambda: FIRED_BY_A_DEAD_BROKER <= prometheus.firing(),
                 f"Prometheus to fire {sorted(FIRED_BY_A_DEAD_BROKER)}", timeout=60, interval=1)
        # Leaders that dropped the silent follower themselves counted a shrink (the controller may
        # have removed it first from the others, as Kafka's does once the broker's session expires).
        assert total(cluster.scrape_all(survivors), "kafka_server_replicamanager_isrshrinks_total") >= 1
        assert total(cluster.scrape_all(survivors), "kafka_controller_kafkacontroller_offlinepartitionscount") == 1

        cluster.brokers[victim].start()
        wait_for(lambda: total(cluster.scrape_all(), "kafka_server_replicamanager_underreplicatedpartitions") == 0
                 and total(cluster.scrape_all(), "kafka_controller_kafkacontroller_offlinepartitionscount") == 0,
                 "every partition back in sync and online", timeout=60, interval=0.5)
        assert total(cluster.scrape_all(survivors), "kafka_server_replicamanager_isrexpands_total") >= 4
        wait_for(lambda: not FIRED_BY_A_DEAD_BROKER & prometheus.firing(), "the alerts to resolve", timeout=30,
                 interval=1)
    except BaseException:
        print(f"--- prometheus log ---\n{prometheus.log_tail()}")
        raise
    finally:
        prometheus.stop()
