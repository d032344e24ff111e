"""Network namespaces, a bridge and veth pairs made by a test, and found again by prefix after a crash.

Each ``FaultNetwork`` owns a tag (``pkf`` + 4 hex digits): its namespaces, links and the state file
``/run/pykafka-faults/TAG`` (holding the owner's pid and address block) all carry it. The bridge
lives in a namespace of its own (``TAG-sw``); every node namespace gets a veth pair whose other end
is a port of that bridge, and an address in the network's /24 out of the benchmarking range
198.18.0.0/15. The test process itself is attached too (a veth from the root namespace to the
bridge, with the block's ``.254``), so clients and checks can run in pytest; the only route to the
block is that link, and the namespaces have no other route at all, so no packet leaves the machine.

Blocks are handed out through the state files, so tests on several xdist workers never share one;
``remove_leftovers()`` removes what a dead owner (a crashed or killed run) left behind, and never
touches a live owner's network.
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

PREFIX = "pkf"
STATE_DIR = Path("/run/pykafka-faults")
BLOCKS = 512  # /24s in 198.18.0.0/15


class NetnsError(RuntimeError):
    pass


def netns_unavailable_reason() -> str | None:
    """Why this machine cannot run the fault suite, or None when it can."""
    if os.geteuid() != 0:
        return "the fault-injection suite needs root (network namespaces, iptables, loop devices)"
    for tool in ("ip", "iptables", "losetup", "mkfs.ext4"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/bootstrap.sh installs it)"
    probe = f"{PREFIX}probe{os.getpid() % 10000}"
    try:
        sh("ip", "netns", "add", probe)
    except NetnsError as exc:
        return f"network namespaces are unavailable: {exc}"
    try:
        sh("ip", "netns", "exec", probe, "iptables", "-L", "-n")
    except NetnsError as exc:
        return f"iptables does not work inside a network namespace: {exc}"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return None


def sh(*argv: str, check: bool = True, timeout: float = 30.0) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def address(block: int, host: int) -> str:
    return f"198.{18 + block // 256}.{block % 256}.{host}"


@dataclass(frozen=True)
class Node:
    """One namespace on the bridge."""
    name: str       # the short name the test uses: "zk", "b0", ...
    netns: str      # TAG-name
    ip: str

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]

    def run(self, *argv: str, check: bool = True) -> str:
        return sh(*self.exec_prefix(), *argv, check=check)


class FaultNetwork:
    """A bridge and the nodes a test puts on it; ``close()`` removes them all."""

    def __init__(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        remove_leftovers()
        self.tag, self.block = _claim()
        self.nodes: dict[str, Node] = {}
        self.switch = f"{self.tag}-sw"
        self.host_link = f"{self.tag}-h"
        try:
            sh("ip", "netns", "add", self.switch)
            sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", "br0", "up")
            self._plug(self.host_link, None)
            sh("ip", "addr", "add", f"{address(self.block, 254)}/24", "dev", self.host_link)
            sh("ip", "link", "set", self.host_link, "up")
        except BaseException:
            self.close()
            raise

    @property
    def host_ip(self) -> str:
        """The test process's own address on the bridge."""
        return address(self.block, 254)

    def add_node(self, name: str) -> Node:
        node = Node(name, f"{self.tag}-{name}", address(self.block, len(self.nodes) + 1))
        sh("ip", "netns", "add", node.netns)
        link = f"{self.tag}-{name}"
        self._plug(link, node.netns)
        sh("ip", "-n", node.netns, "addr", "add", f"{node.ip}/24", "dev", link)
        sh("ip", "-n", node.netns, "link", "set", link, "up")
        sh("ip", "-n", node.netns, "link", "set", "lo", "up")
        self.nodes[name] = node
        return node

    def _plug(self, link: str, netns: str | None) -> None:
        """A veth pair: ``link`` in ``netns`` (None: here), its peer a port of the bridge."""
        peer = f"{link}p"
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", peer)
        if netns is not None:
            sh("ip", "link", "set", link, "netns", netns)
        sh("ip", "link", "set", peer, "netns", self.switch)
        sh("ip", "-n", self.switch, "link", "set", peer, "master", "br0", "up")

    def close(self) -> None:
        _remove(self.tag)


def _claim() -> tuple[str, int]:
    """A fresh tag and an address block no live network uses, recorded in the tag's state file."""
    used = {state.get("block") for state in _states().values()}
    free = [b for b in range(BLOCKS) if b not in used]
    if not free:
        raise NetnsError("every 198.18.0.0/15 block is in use by a live fault test")
    for _ in range(100):
        tag = f"{PREFIX}{secrets.token_hex(2)}"
        block = free[secrets.randbelow(len(free))]
        try:
            fd = os.open(STATE_DIR / tag, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as out:
            json.dump({"pid": os.getpid(), "block": block}, out)
        # Two workers may have picked the same free block at once: the lower tag keeps it.
        if any(state.get("block") == block and other < tag for other, state in _states().items()):
            (STATE_DIR / tag).unlink()
            free.remove(block)
            continue
        return tag, block
    raise NetnsError("could not claim a network tag")


def _states() -> dict[str, dict[str, int]]:
    states = {}
    for path in STATE_DIR.glob(f"{PREFIX}*"):
        try:
            states[path.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            states[path.name] = {}
    return states


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def remove_leftovers() -> None:
    """Remove the namespaces, links, mounts and loop devices of networks whose owner is dead."""
    # Namespaces first: a live owner writes its state file before it makes any namespace.
    tags = {ns.split("-", 1)[0] for ns in _netns_names() if ns.startswith(PREFIX)}
    states = _states()
    live = {tag for tag, state in states.items() if _alive(state.get("pid"))}
    tags.update(states)
    for tag in sorted(tags - live):
        _remove(tag)


def _netns_names() -> list[str]:
    return [line.split()[0] for line in sh("ip", "netns", "list", check=False).splitlines() if line.strip()]


def _remove(tag: str) -> None:
    """Kill what runs in the tag's namespaces (a dead owner's brokers), then delete everything."""
    from tests.faults.disks import remove_tag_mounts

    namespaces = [ns for ns in _netns_names() if ns.split("-", 1)[0] == tag]
    for ns in namespaces:
        for pid in sh("ip", "netns", "pids", ns, check=False).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    remove_tag_mounts(tag)
    for ns in namespaces:
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", f"{tag}-h", check=False)
    (STATE_DIR / tag).unlink(missing_ok=True)
