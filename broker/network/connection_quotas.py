"""ConnectionQuotas: max.connections, max.connections.per.ip (with overrides) and
max.connection.creation.rate.

A connection over its IP's limit is closed right after accept, as Kafka does. Reaching
max.connections instead makes acceptors stop accepting (new clients wait in the listen
backlog) until a connection closes. A connection that takes the creation rate over
max.connection.creation.rate is held for the throttle time Kafka computes (its acceptor waits the
same way, accepting nothing meanwhile), except on the inter-broker listener of a broker with
several listeners. The rate is Kafka's: connections per second over quota.window.num windows of
quota.window.size.seconds, never measured over less than all but one of them, and no connection
is held longer than one window. An IP over its own connection_creation_rate (``/config/ips``,
KIP-612) has the connection held that long and then closed, counted neither for it nor broker-wide.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Mapping

from broker.config_defs import ConfigError
from broker.quota.sampled_rate import SampledRate

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
IDLE_IP_SENSOR_S = 3600.0


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
                 overrides: Mapping[str, int] | None = None, max_connection_creation_rate: int = INT_MAX,
                 quota_window_num: int = 11, quota_window_size_s: int = 1) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connection_creation_rate = max_connection_creation_rate
        self._window = (quota_window_num, quota_window_size_s)
        self._creation_rate = SampledRate(quota_window_num, quota_window_size_s)
        self._max_throttle_s = float(quota_window_size_s)  # Kafka holds a connection one window at most
        # connection_creation_rate of /config/ips/<ip> and of <default> (KIP-612), and each IP's rate.
        self._ip_rates: dict[str, int] = {}
        self.default_ip_rate = INT_MAX
        self._ip_sensors: dict[str, SampledRate] = {}
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

    def record_connection_creation(self, protected: bool = False, now: float | None = None) -> float:
        """Count a new connection; how long (seconds) to hold it so the creation rate keeps within
        max.connection.creation.rate (Kafka's recordConnectionAndGetThrottleTimeMs)."""
        if self.max_connection_creation_rate >= INT_MAX or protected:
            return 0.0
        now = time.monotonic() if now is None else now
        self._creation_rate.record(1, now)
        return min(self._creation_rate.throttle_s(self.max_connection_creation_rate, now), self._max_throttle_s)

    def update_ip_connection_rate(self, ip: str | None, rate: int | None) -> None:
        """A /config/ips entity's connection_creation_rate (``ip`` None: the <default> IP; ``rate``
        None: removed), as Kafka's updateIpConnectionRateQuota."""
        if ip is None:
            self.default_ip_rate = INT_MAX if rate is None else rate
            log.info("Updated default max IP connection rate to %d", self.default_ip_rate)
        elif rate is None:
            log.info("Removing max connection rate override for %s", ip)
            self._ip_rates.pop(normalize_ip(ip), None)
        else:
            log.info("Updating max connection rate override for %s to %d", ip, rate)
            self._ip_rates[normalize_ip(ip)] = rate

    def connection_rate_for_ip(self, ip: str) -> int:
        return self._ip_rates.get(ip, self.default_ip_rate)

    def record_ip_connection(self, ip: str, protected: bool = False, now: float | None = None) -> float:
        """Count a connection from ``ip`` against its connection_creation_rate; over it, the
        connection is not admitted: how long (seconds) to hold it before closing it, and it is
        counted neither for the IP nor broker-wide (Kafka's recordIpConnectionMaybeThrottle); 0
        when admitted."""
        quota = self.connection_rate_for_ip(ip)
        if quota >= INT_MAX:
            return 0.0
        now = time.monotonic() if now is None else now
        sensor = self._ip_sensors.get(ip)
        if sensor is None:
            self._purge_idle_ip_sensors(now)
            sensor = self._ip_sensors[ip] = SampledRate(*self._window)
        sensor.record(1, now)
        hold_s = min(sensor.throttle_s(quota, now), self._max_throttle_s)
        if hold_s <= 0:
            return 0.0
        sensor.record(-1, now)
        if self.max_connection_creation_rate < INT_MAX and not protected:
            self._creation_rate.record(-1, now)
        return hold_s

    def _purge_idle_ip_sensors(self, now: float) -> None:
        """Kafka expires an idle IP's sensor after an hour: so do we, when a new IP comes."""
        idle = [ip for ip, sensor in self._ip_sensors.items() if now - sensor.last_record > IDLE_IP_SENSOR_S]
        for ip in idle:
            del self._ip_sensors[ip]

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
