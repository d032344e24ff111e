"""A real standalone ZooKeeper server from Debian's `zookeeper` package, for integration tests.

The server runs `QuorumPeerMain` directly with a generated zoo.cfg (the Debian jar's manifest pulls in
its dependencies), so nothing under /etc/zookeeper or /var/lib/zookeeper is touched and any number of
servers can run side by side (one per test, pytest-xdist workers included).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.harness.ports import free_port
from tests.harness.processes import die_with_parent

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING_JAR = Path("/usr/share/java/slf4j-simple.jar")
TICK_TIME_MS = 100
MIN_SESSION_TIMEOUT_MS = 2 * TICK_TIME_MS


class ZooKeeperHarnessError(RuntimeError):
    """ZooKeeper could not be started or stopped."""


def zookeeper_unavailable_reason() -> str | None:
    """Why a ZooKeeper server can't be started on this machine, or None if it can."""
    if shutil.which("java") is None:
        return "java is not installed (install Debian's zookeeper package: scripts/bootstrap.sh)"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing (install Debian's zookeeper package: scripts/bootstrap.sh)"
    return None


def four_letter_word(host: str, port: int, command: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter-word command and return the reply ('' if unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(command.encode("ascii"))
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper process; stop()/start() keeps its port and data (for outage tests)."""

    def __init__(self, base_dir: Path | None = None, port: int | None = None, host: str = "127.0.0.1",
                 command_prefix: Sequence[str] = (), tls: tuple[Path, str, Path] | None = None,
                 sasl_users: Mapping[str, str] | None = None) -> None:
        """``host`` and ``command_prefix`` place the server elsewhere than loopback, e.g. in a network
        namespace (``["ip", "netns", "exec", NAME]`` and that namespace's address). ``tls``: (PKCS12
        keystore, its password, PEM truststore) for a second, TLS-only port (``secure_port``) that
        wants client certificates. ``sasl_users``: the users and passwords SASL DIGEST-MD5 accepts
        (ZooKeeper's DigestLoginModule in the JAAS file's ``Server`` context); clients that do not
        authenticate are still served, as the world of ACLs."""
        self.tls = tls
        self.sasl_users = dict(sasl_users or {})
        self.secure_port = free_port() if tls else None
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="zk-test-"))
        self.host = host
        self.command_prefix = list(command_prefix)
        self.port = port or free_port()
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "zoo.cfg"
        self.log_path = self.base_dir / "zookeeper.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string_with_chroot(self, chroot: str) -> str:
        return f"{self.connect_string}/{chroot.strip('/')}"

    def secure_connect_string_with_chroot(self, chroot: str) -> str:
        assert self.secure_port is not None, "started without tls"
        return f"{self.host}:{self.secure_port}/{chroot.strip('/')}"

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "\n".join(
                [
                    f"tickTime={TICK_TIME_MS}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}",
                    "maxSessionTimeout=60000",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,cons,mntr,dump",
                    "forceSync=no",
                    "preAllocSize=1024",
                    "maxClientCnxns=0",
                    *self._tls_config(),
                    *(["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"]
                      if self.sasl_users else []),
                    "",
                ]
            )
        )

    def _tls_config(self) -> list[str]:
        if self.tls is None:
            return []
        keystore, password, truststore = self.tls
        return [f"secureClientPort={self.secure_port}", f"secureClientPortAddress={self.host}",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"ssl.keyStore.location={keystore}", f"ssl.keyStore.password={password}", "ssl.keyStore.type=PKCS12",
                f"ssl.trustStore.location={truststore}", "ssl.trustStore.type=PEM", "ssl.clientAuth=need"]

    def _sasl_options(self) -> list[str]:
        if not self.sasl_users:
            return []
        users = " ".join(f'user_{name}="{password}"' for name, password in self.sasl_users.items())
        jaas = self.base_dir / "zookeeper-jaas.conf"
        jaas.write_text(f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {users};\n}};\n")
        return [f"-Djava.security.auth.login.config={jaas}"]

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it serves. The server dies with the thread that
        started it (call from the test's main thread, as fixtures do)."""
        if self.is_running:
            return
        reason = zookeeper_unavailable_reason()
        if reason:
            raise ZooKeeperHarnessError(reason)
        self._write_config()
        jars = [ZOOKEEPER_JAR, SLF4J_BINDING_JAR]
        if self.tls is not None:  # the Netty server (TLS) needs Debian's netty jars, which the manifest omits
            jars += sorted(p for p in ZOOKEEPER_JAR.parent.glob("netty-*.jar") if not p.name.startswith("netty-all"))
        classpath = os.pathsep.join(str(jar) for jar in jars if jar.exists())
        command = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            *self._sasl_options(),
            "-cp",
            classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(self.config_path),
        ]
        log = open(self.log_path, "ab")
        try:
            self._process = subprocess.Popen(
                [*self.command_prefix, *command],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ZooKeeperHarnessError(
                    f"ZooKeeper exited with {self._process.returncode}; log:\n{self._log_tail()}"
                )
            if four_letter_word(self.host, self.port, "ruok", timeout=0.5) == "imok" and self._serving():
                return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperHarnessError(f"ZooKeeper did not start within {timeout}s; log:\n{self._log_tail()}")

    def _serving(self) -> bool:
        # 'ruok' answers before the server accepts sessions; 'srvr' reports a mode only once serving.
        return "Mode: standalone" in four_letter_word(self.host, self.port, "srvr", timeout=0.5)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL); the data directory is kept for a restart."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL, as a crash would; the data directory is kept for a restart."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.connect_string}, running={self.is_running})"


def expire_session(connect_string: str, session_id: int, password: bytes, timeout: float = 10.0) -> None:
    """Expire a ZooKeeper session the way the server would: attach a second client to the same
    session (which takes the session over from the first connection) and close it."""
    from kazoo.client import KazooClient

    intruder = KazooClient(hosts=connect_string, client_id=(session_id, password), timeout=timeout)
    intruder.start(timeout=timeout)
    try:
        intruder.stop()
    finally:
        intruder.close()
