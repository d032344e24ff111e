"""The quickstart as written: every command block marked ``<!-- runnable -->`` in the README and in
docs/getting-started.md runs, in order, in one shell, against a real broker.

The documents say localhost:9092 and ./data/kafka-logs, as ``scripts/start.sh`` has them; here the
broker is the harness's, on a free port, so the address is substituted and ``data/kafka-logs`` in
the test's working directory is a link to the broker's log dir (``.venv`` one to this interpreter's
virtualenv). ``$KAFKA`` is Kafka 3.9's tools from ../shared/kafka-cli.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KAFKA_CLI, KafkaCli, kafka_cli_unavailable_reason

REPO = Path(__file__).resolve().parents[3]
DOCUMENTS = (REPO / "README.md", REPO / "docs" / "getting-started.md")
RUNNABLE = re.compile(r"<!-- runnable -->\n```(?:bash)?\n(.*?)\n```", re.S)


def runnable_blocks(path: Path) -> list[str]:
    return RUNNABLE.findall(path.read_text())


def test_the_documents_mark_their_quickstart_blocks() -> None:
    readme = "\n".join(runnable_blocks(DOCUMENTS[0]))
    for needed in ("kafka-console-producer.sh", "KafkaProducer", "group_id=", "kafka-consumer-groups.sh",
                   "pykafka-topic-stats"):
        assert needed in readme, needed
    assert runnable_blocks(DOCUMENTS[1])


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_quickstart_runs_as_written(broker: BrokerProcess, tmp_path: Path) -> None:
    reason = kafka_cli_unavailable_reason()
    if reason:
        pytest.skip(reason)  # Kafka's tools come from ../shared, which may be absent (as every such test)
    venv = Path(sys.executable).parent.parent
    assert shutil.which("pykafka-topic-stats", path=str(venv / "bin")) or shutil.which("pykafka-topic-stats"), \
        "the console commands are not installed: scripts/bootstrap.sh installs them (pip install -e .)"
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "kafka-logs").symlink_to(broker.log_dir)
    (work / ".venv").symlink_to(venv)
    script = "\n".join(block for path in DOCUMENTS for block in runnable_blocks(path))
    script = "set -euo pipefail\n" + script.replace("localhost:9092", broker.bootstrap)
    env = KafkaCli(tmp_path / "kafka-cli").env({"KAFKA": str(KAFKA_CLI)})

    done = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=840)

    assert done.returncode == 0, f"--- stdout ---\n{done.stdout[-6000:]}\n--- stderr ---\n{done.stderr[-6000:]}"
    assert "sent 20000 page views" in done.stdout
    counts = re.search(r"Counter\(\{(.*?)\}\)", done.stdout)
    assert counts, done.stdout
    # The group read everything: the console producer's 3 events and kafka-python's 20,000.
    assert sum(int(n) for n in re.findall(r": (\d+)", counts.group(1))) == 20_003
    assert (work / "stats" / "traffic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any((work / "stats" / "partitions").glob("*.parquet"))
    assert "getting-started-group" in done.stdout and "read 1001" in done.stdout
