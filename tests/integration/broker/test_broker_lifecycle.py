"""Broker process lifecycle: config errors, clean and unclean restarts, hostile connections."""
from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from storage.meta_properties import read_meta_properties
from tests.harness.broker import REPO_ROOT, BrokerProcess
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer


def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=30)


def _consume(bootstrap: str, topic: str) -> list[str]:
    result = _kcat("-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o:%s\n")
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_invalid_config_names_the_key_and_exits_1(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=0\nzookeeper.connect=127.0.0.1:1\nlog.dirs={tmp_path / 'logs'}\n")
    result = subprocess.run([sys.executable, "-m", "broker", str(props), "--override", "num.partitions=0"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "num.partitions" in result.stderr


def test_sigterm_shuts_down_cleanly_and_deregisters(broker: BrokerProcess, shared_zookeeper: ZooKeeperServer) -> None:
    broker.create_topic("clean", 2)
    assert _kcat("-b", broker.bootstrap, "-P", "-t", "clean", "-p", "0", stdin="x\ny\n").returncode == 0
    meta = read_meta_properties(str(broker.log_dir))
    cluster_id = broker.metadata().cluster_id
    assert meta is not None and meta.broker_id == 0 and meta.cluster_id == cluster_id
    assert broker.stop() == 0
    assert (broker.log_dir / ".kafka_cleanshutdown").exists()
    assert "shut down completed" in broker.log_tail()
    chroot = broker.zk_connect.split("/", 1)[1]
    zk = KazooClient(hosts=shared_zookeeper.connect_string)
    zk.start(10)
    try:
        assert zk.exists(f"/{chroot}/brokers/ids/0") is None
    finally:
        zk.stop()
        zk.close()


def test_restart_keeps_data_and_offsets_continue(broker: BrokerProcess) -> None:
    topic = f"r-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    assert _kcat("-b", broker.bootstrap, "-P", "-t", topic, "-z", "lz4",
                 stdin="".join(f"m{i}\n" for i in range(10))).returncode == 0
    assert broker.stop() == 0
    broker.start()
    broker.wait_for_leaders(topic, 1)
    assert _kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="n0\nn1\n").returncode == 0
    assert _consume(broker.bootstrap, topic) == [f"{i}:m{i}" for i in range(10)] + ["10:n0", "11:n1"]


@pytest.mark.parametrize("broker", [{"zookeeper.session.timeout.ms": "2000"}], indirect=True)
def test_restart_after_kill_recovers_the_log(broker: BrokerProcess) -> None:
    topic = f"k-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    assert _kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="a\nb\nc\n").returncode == 0
    broker.kill()
    assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
    broker.wait_until_deregistered()  # as with Kafka, the id is taken until the old session expires
    broker.start()
    broker.wait_for_leaders(topic, 1)
    assert _kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="d\n").returncode == 0
    assert _consume(broker.bootstrap, topic) == ["0:a", "1:b", "2:c", "3:d"]


def _closed_by_broker(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_bad_connections_are_closed_while_another_client_keeps_producing(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = f"b-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    stop = threading.Event()
    sent: list[int] = []

    def produce() -> None:
        while not stop.is_set():
            sent.append(producer.send(topic, value=b"ok", partition=0).get(20).offset)

    worker = threading.Thread(target=produce)
    worker.start()
    try:
        hostile = {
            "malformed header": struct.pack(">i", 3) + b"\x00\x12\x00",
            "negative size": struct.pack(">i", -5),
            "unknown api key": struct.pack(">ihhih", 10, 9999, 0, 1, 0),
            "oversized request": struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 100,
        }
        for what, payload in hostile.items():
            with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
                sock.sendall(payload)
                assert _closed_by_broker(sock), what
        before = len(sent)
        deadline = time.monotonic() + 20
        while len(sent) < before + 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sent) >= before + 5
    finally:
        stop.set()
        worker.join(30)
        producer.close(10)
    assert sent == list(range(len(sent)))


def test_second_broker_with_a_taken_id_exits_1(broker: BrokerProcess, tmp_path: Path) -> None:
    twin = BrokerProcess(broker.zk_connect, 0, tmp_path / "twin")
    twin.config_path.write_text("".join(f"{k}={v}\n" for k, v in twin.properties().items()))
    result = subprocess.run([sys.executable, "-m", "broker", str(twin.config_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "broker id 0 is already registered" in result.stderr
    assert broker.metadata().brokers[0].port == broker.port  # the first broker is untouched


def test_sigusr1_and_sigquit_write_stack_dumps_and_the_broker_keeps_serving(broker: BrokerProcess) -> None:
    """SIGUSR1 logs every task's and thread's stack from the event loop; SIGQUIT (``kill -3``) writes
    every thread's from the signal handler (faulthandler), as a JVM's thread dump. Neither stops it."""
    topic = f"dumps-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    assert broker.process is not None
    broker.process.send_signal(signal.SIGUSR1)
    wait_for(lambda: "--- task kafka-request-handler-0" in broker.log_path.read_text(errors="replace"),
             "the SIGUSR1 dump with the request handlers' tasks")
    broker.process.send_signal(signal.SIGQUIT)
    dump = wait_for(lambda: "Current thread" in (text := broker.log_path.read_text(errors="replace")) and text,
                    "the SIGQUIT thread dump")
    assert "asyncio" in dump.split("Current thread", 1)[1] or "uvloop" in dump.split("Current thread", 1)[1]
    produced = _kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="after the dumps\n")
    assert produced.returncode == 0, produced.stderr
    assert _consume(broker.bootstrap, topic) == ["0:after the dumps"]
    assert broker.process.poll() is None
