"""ConnectionQuotas: max.connections and max.connections.per.ip (with overrides).

A connection over its IP's limit is closed right after accept, as Kafka does. Reaching
max.connections instead makes acceptors stop accepting (new clients wait in the listen
backlog) until a connection closes.
"""

from __future__ import annotations

import logging
import socket
from collections import defaultdict
from collections.abc import Callable, Mapping

from broker.config_defs import ConfigError

log = logging.getLogger(__name__)


def normalize_ip(address: str) -> str:
    """IPv4-mapped IPv6 addresses (from dual-stack listeners) become plain IPv4 (per accept: cheap)."""
    if address.startswith("::ffff:") and "." in address:
        return address[7:]
    return address


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Host names in max.connections.per.ip.overrides resolve to their address, as in Kafka."""
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            address = socket.gethostbyname(host)
        except OSError as exc:
            raise ConfigError("max.connections.per.ip.overrides", f"cannot resolve host {host!r}: {exc}") from None
        resolved[normalize_ip(address)] = limit
    return resolved


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_connections_per_ip: int,
                 overrides: Mapping[str, int] | None = None) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.overrides = resolve_overrides(overrides or {})
        self.total = 0
        self._per_ip: defaultdict[str, int] = defaultdict(int)
        self._capacity_waiters: list[Callable[[], None]] = []

    def max_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_connections_per_ip)

    def count(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    @property
    def at_capacity(self) -> bool:
        return self.total >= self.max_connections

    def try_inc(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False if its per-IP limit is already reached."""
        if self._per_ip.get(ip, 0) >= self.max_for(ip):
            return False
        self._per_ip[ip] += 1
        self.total += 1
        return True

    def dec(self, ip: str) -> None:
        count = self._per_ip.get(ip, 0)
        if count <= 0:
            log.error("Attempted to decrease connection count for address %s with no connections", ip)
            return
        if count == 1:
            del self._per_ip[ip]
        else:
            self._per_ip[ip] = count - 1
        self.total -= 1
        if self._capacity_waiters and not self.at_capacity:
            waiters, self._capacity_waiters = self._capacity_waiters, []
            for resume in waiters:
                resume()

    def wait_for_capacity(self, resume: Callable[[], None]) -> None:
        """Call ``resume`` once the total drops below max.connections."""
        self._capacity_waiters.append(resume)
