"""The suite's own machinery: networks are found and removed after a crashed run (never a live
one), and the NFQUEUE delayer really holds packets back."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.faults.netns import STATE_DIR, FaultNetwork, netns_unavailable_reason, remove_leftovers, sh
from tests.faults.nemesis import DELAY_QUEUE, REPO_ROOT

pytestmark = pytest.mark.faults


@pytest.fixture
def network() -> Iterator[FaultNetwork]:
    if reason := netns_unavailable_reason():
        pytest.skip(reason)
    made = FaultNetwork()
    try:
        yield made
    finally:
        made.close()


def _namespaces(tag: str) -> list[str]:
    return [line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.startswith(tag)]


def test_leftovers_of_a_dead_owner_are_removed_and_live_ones_kept(network: FaultNetwork) -> None:
    network.add_node("a")
    orphan = FaultNetwork()
    orphan.add_node("x")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    state = STATE_DIR / orphan.tag
    state.write_text(json.dumps({"pid": int(dead.stdout), "block": orphan.block}))  # as if its run crashed
    try:
        remove_leftovers()
        assert _namespaces(orphan.tag) == [] and not state.exists()
        assert sh("ip", "link", "show", orphan.host_link, check=False) == ""
        assert sorted(_namespaces(network.tag)) == [f"{network.tag}-a", f"{network.tag}-sw"]
    finally:
        orphan.close()


def test_net_delay_holds_every_packet_back(network: FaultNetwork) -> None:
    node = network.add_node("a")
    server = subprocess.Popen([*node.exec_prefix(), sys.executable, "-c", (
        "import socket\n"
        f"s = socket.create_server(('{node.ip}', 7000))\n"
        "print('ready', flush=True)\n"
        "c, _ = s.accept()\n"
        "while (d := c.recv(100)):\n"
        "    c.sendall(d)\n")], stdout=subprocess.PIPE, text=True)
    delayer = subprocess.Popen([*node.exec_prefix(), sys.executable, "-m", "tests.faults.net_delay", "--queue",
                                str(DELAY_QUEUE), "--delay-ms", "50"], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().startswith("ready")
        assert delayer.stdout is not None and delayer.stdout.readline().startswith("net_delay:")
        node.run("iptables", "-A", "OUTPUT", "-o", node.netns, "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE),
                 "--queue-bypass")
        with socket.create_connection((node.ip, 7000), timeout=10) as client:
            round_trips = []
            for _ in range(5):
                start = time.monotonic()
                client.sendall(b"x")
                assert client.recv(1) == b"x"
                round_trips.append(time.monotonic() - start)
        assert min(round_trips) >= 0.050, round_trips  # every answer left the namespace 50 ms late
    finally:
        delayer.terminate()
        server.kill()
        delayer.wait(10)
        server.wait(10)
