"""KafkaConfig: the broker's configuration, read from a Kafka ``server.properties``.

Values live in one dict of typed values (keyed by Kafka's names) so that dynamic broker
configs can later replace entries through ``update``; attributes are typed views of that
dict. Unknown keys are logged and kept in ``originals``; an invalid value raises
ConfigError naming the key, which stops start-up.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar, overload

from broker.config_defs import (
    CONFIG_KEYS,
    LISTENER_OVERRIDABLE_PREFIXES,
    LISTENER_PREFIX,
    SECURITY_PROTOCOLS,
    SYNONYM_TO_MS,
    TOPIC_CONFIG_SYNONYMS,
    UNSUPPORTED_KEYS,
    ConfigError,
    ConfigKey,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# --- Java properties syntax ---------------------------------------------------------------

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[str]:
    """Join backslash-continued natural lines; drop blank and comment lines (# or !)."""
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_WHITESPACE)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        else:
            line = pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = None
        yield line
    if pending is not None:
        yield pending


def _unescape(text: str, key: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(key, f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped '=', ':' or whitespace; one separator may follow."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text (java.util.Properties.load semantics); later keys win."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, raw_key)
        props[key] = _unescape(raw_value, key)
    return props


def load_properties(path: str) -> dict[str, str]:
    # Java reads properties files as ISO-8859-1 with \u escapes; UTF-8 is what people write now.
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def parse_override(arg: str) -> tuple[str, str]:
    """``key=value`` from ``--override``; the value may itself contain '='."""
    key, sep, value = arg.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(arg, "an override must look like key=value")
    return key, value


# --- listeners -----------------------------------------------------------------------------

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener: ``host`` is "" to bind every interface."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def _with_synonyms(props: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's KafkaConfig.populateSynonyms: broker.id and node.id stand for each other."""
    merged = dict(props)
    for key, synonym in (("broker.id", "node.id"), ("node.id", "broker.id")):
        if key in merged and synonym not in merged:
            merged[synonym] = merged[key]
    return merged


def parse_endpoints(key: str, text: str, protocol_map: Mapping[str, str]) -> list[EndPoint]:
    """A listeners string: comma-separated NAME://host:port entries."""
    endpoints = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        match = _ENDPOINT.match(entry.strip())
        if not match:
            raise ConfigError(key, f"unable to parse {entry!r} as a listener (expected NAME://host:port)")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"invalid port {port} in {entry!r}")
        if name not in protocol_map:
            raise ConfigError(key, f"no security protocol defined for listener {name}")
        endpoints.append(EndPoint(name, host, port, protocol_map[name]))
    return endpoints


def parse_protocol_map(key: str, text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(key, f"invalid map entry {item!r}: expected LISTENER_NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"unknown security protocol {protocol!r} for listener {name}")
        if name in result:
            raise ConfigError(key, f"listener {name} appears more than once")
        result[name] = protocol
    return result


def parse_ip_overrides(text: str) -> dict[str, int]:
    key = "max.connections.per.ip.overrides"
    result: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ConfigError(key, f"invalid entry {item!r}: expected host:count")
        try:
            result[host.strip()] = int(count)
        except ValueError:
            raise ConfigError(key, f"invalid connection count in {item!r}") from None
        if result[host.strip()] < 0:
            raise ConfigError(key, f"negative connection count in {item!r}")
    return result


def canonical_hostname() -> str:
    """What Java's InetAddress.getLocalHost().getCanonicalHostName() gives, else localhost."""
    try:
        return socket.getfqdn() or "localhost"
    except OSError:
        return "localhost"


# --- KafkaConfig -------------------------------------------------------------------------------


class _Value(Generic[T]):
    """A typed attribute reading one key from KafkaConfig's value dict."""

    def __init__(self, key: str) -> None:
        if key not in CONFIG_KEYS:
            raise KeyError(key)
        self.key = key

    @overload
    def __get__(self, obj: None, owner: type) -> _Value[T]: ...
    @overload
    def __get__(self, obj: KafkaConfig, owner: type) -> T: ...
    def __get__(self, obj: KafkaConfig | None, owner: type) -> Any:
        return self if obj is None else obj._values[self.key]


class KafkaConfig:
    """Typed broker configuration; construct with ``from_properties`` or ``load``."""

    broker_id = _Value[int]("broker.id")
    broker_id_generation_enable = _Value[bool]("broker.id.generation.enable")
    reserved_broker_max_id = _Value[int]("reserved.broker.max.id")
    broker_rack = _Value["str | None"]("broker.rack")
    zookeeper_connect = _Value[str]("zookeeper.connect")
    zookeeper_session_timeout_ms = _Value[int]("zookeeper.session.timeout.ms")
    zookeeper_max_in_flight_requests = _Value[int]("zookeeper.max.in.flight.requests")
    unstable_api_versions_enable = _Value[bool]("unstable.api.versions.enable")
    request_timeout_ms = _Value[int]("request.timeout.ms")
    controlled_shutdown_enable = _Value[bool]("controlled.shutdown.enable")
    delete_topic_enable = _Value[bool]("delete.topic.enable")
    auto_create_topics_enable = _Value[bool]("auto.create.topics.enable")
    num_partitions = _Value[int]("num.partitions")
    default_replication_factor = _Value[int]("default.replication.factor")
    message_max_bytes = _Value[int]("message.max.bytes")
    compression_type = _Value[str]("compression.type")
    fetch_max_bytes = _Value[int]("fetch.max.bytes")
    num_network_threads = _Value[int]("num.network.threads")
    num_io_threads = _Value[int]("num.io.threads")
    queued_max_requests = _Value[int]("queued.max.requests")
    queued_max_request_bytes = _Value[int]("queued.max.request.bytes")
    socket_send_buffer_bytes = _Value[int]("socket.send.buffer.bytes")
    socket_receive_buffer_bytes = _Value[int]("socket.receive.buffer.bytes")
    socket_request_max_bytes = _Value[int]("socket.request.max.bytes")
    socket_listen_backlog_size = _Value[int]("socket.listen.backlog.size")
    max_connections = _Value[int]("max.connections")
    max_connections_per_ip = _Value[int]("max.connections.per.ip")
    max_connection_creation_rate = _Value[int]("max.connection.creation.rate")
    quota_window_num = _Value[int]("quota.window.num")
    quota_window_size_seconds = _Value[int]("quota.window.size.seconds")
    connections_max_idle_ms = _Value[int]("connections.max.idle.ms")
    log_segment_bytes = _Value[int]("log.segment.bytes")
    log_retention_bytes = _Value[int]("log.retention.bytes")
    log_retention_check_interval_ms = _Value[int]("log.retention.check.interval.ms")
    log_cleanup_policy = _Value[list[str]]("log.cleanup.policy")
    log_index_size_max_bytes = _Value[int]("log.index.size.max.bytes")
    log_index_interval_bytes = _Value[int]("log.index.interval.bytes")
    log_flush_interval_messages = _Value[int]("log.flush.interval.messages")
    log_flush_scheduler_interval_ms = _Value[int]("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms = _Value[int]("log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms = _Value[int]("log.flush.start.offset.checkpoint.interval.ms")
    log_segment_delete_delay_ms = _Value[int]("log.segment.delete.delay.ms")
    log_preallocate = _Value[bool]("log.preallocate")
    log_message_timestamp_type = _Value[str]("log.message.timestamp.type")
    num_recovery_threads_per_data_dir = _Value[int]("num.recovery.threads.per.data.dir")
    min_insync_replicas = _Value[int]("min.insync.replicas")
    unclean_leader_election_enable = _Value[bool]("unclean.leader.election.enable")
    replica_lag_time_max_ms = _Value[int]("replica.lag.time.max.ms")
    replica_socket_timeout_ms = _Value[int]("replica.socket.timeout.ms")
    replica_fetch_max_bytes = _Value[int]("replica.fetch.max.bytes")
    replica_fetch_wait_max_ms = _Value[int]("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes = _Value[int]("replica.fetch.min.bytes")
    replica_fetch_backoff_ms = _Value[int]("replica.fetch.backoff.ms")
    replica_fetch_response_max_bytes = _Value[int]("replica.fetch.response.max.bytes")
    replica_high_watermark_checkpoint_interval_ms = _Value[int]("replica.high.watermark.checkpoint.interval.ms")
    num_replica_fetchers = _Value[int]("num.replica.fetchers")
    auto_leader_rebalance_enable = _Value[bool]("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage = _Value[int]("leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds = _Value[int]("leader.imbalance.check.interval.seconds")
    group_min_session_timeout_ms = _Value[int]("group.min.session.timeout.ms")
    group_max_session_timeout_ms = _Value[int]("group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms = _Value[int]("group.initial.rebalance.delay.ms")
    group_max_size = _Value[int]("group.max.size")
    offsets_topic_num_partitions = _Value[int]("offsets.topic.num.partitions")
    offsets_topic_replication_factor = _Value[int]("offsets.topic.replication.factor")
    offsets_topic_segment_bytes = _Value[int]("offsets.topic.segment.bytes")
    offsets_retention_minutes = _Value[int]("offsets.retention.minutes")
    offsets_retention_check_interval_ms = _Value[int]("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms = _Value[int]("offsets.commit.timeout.ms")
    transaction_state_log_num_partitions = _Value[int]("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor = _Value[int]("transaction.state.log.replication.factor")
    transaction_state_log_segment_bytes = _Value[int]("transaction.state.log.segment.bytes")
    transaction_state_log_min_isr = _Value[int]("transaction.state.log.min.isr")
    transactional_id_expiration_ms = _Value[int]("transactional.id.expiration.ms")
    transaction_max_timeout_ms = _Value[int]("transaction.max.timeout.ms")
    producer_id_expiration_ms = _Value[int]("producer.id.expiration.ms")

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.originals: dict[str, Any] = _with_synonyms(props)
        for key in sorted(set(props) - CONFIG_KEYS.keys()):
            if _listener_override(key) is None:
                log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        for key in sorted(set(props) & UNSUPPORTED_KEYS):
            log.warning("The configuration '%s' was supplied but this broker does not implement it.", key)
        self._values = self._parse_all(self.originals)
        self._listener_values = _parse_listener_overrides(props)
        self._validate(self._values, self.originals)

    # --- construction ---------------------------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, Any], overrides: Iterable[str] = ()) -> KafkaConfig:
        merged = dict(props)
        merged.update(parse_override(arg) for arg in overrides)
        return cls(merged)

    @classmethod
    def load(cls, path: str, overrides: Iterable[str] = ()) -> KafkaConfig:
        """``kafka-server-start.sh path --override k=v ...``"""
        return cls.from_properties(load_properties(path), overrides)

    @staticmethod
    def _parse_all(props: Mapping[str, Any]) -> dict[str, Any]:
        return {name: (key.parse(props[name]) if name in props else key.default)
                for name, key in CONFIG_KEYS.items()}

    # --- generic access -------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The typed value of a known key (its default when not set)."""
        try:
            return self._values[key]
        except KeyError:
            raise ConfigError(key, "unknown configuration") from None

    def is_set(self, key: str) -> bool:
        """Whether the key was given explicitly (DescribeConfigs' STATIC_BROKER_CONFIG)."""
        return key in self.originals

    @staticmethod
    def definition(key: str) -> ConfigKey:
        return CONFIG_KEYS[key]

    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def update(self, changes: Mapping[str, Any]) -> set[str]:
        """Apply new raw values of known or listener-prefixed keys (None removes an override);
        all-or-nothing; returns the changed keys (listener-prefixed ones as given)."""
        unknown = {k for k in changes if k not in CONFIG_KEYS and listener_config_base(k) is None}
        if unknown:
            raise ConfigError(sorted(unknown)[0], "unknown configuration")
        originals = dict(self.originals)
        for key, raw in changes.items():
            if raw is None:
                originals.pop(key, None)
            else:
                originals[key] = raw
        values = self._parse_all(originals)
        self._validate(values, originals)
        listener_values = _parse_listener_overrides(originals)
        changed = {k for k in CONFIG_KEYS if values[k] != self._values[k]}
        changed |= {f"{LISTENER_PREFIX}{listener}.{key}"
                    for listener in set(listener_values) | set(self._listener_values)
                    for key in set(listener_values.get(listener, {})) | set(self._listener_values.get(listener, {}))
                    if listener_values.get(listener, {}).get(key) != self._listener_values.get(listener, {}).get(key)}
        self.originals, self._values = originals, values
        self._listener_values = listener_values
        self.__dict__.pop("advertised_listeners", None)
        return changed

    # --- derived values (Kafka's KafkaConfig accessors) ----------------------------------
    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return parse_protocol_map("listener.security.protocol.map", self._values["listener.security.protocol.map"])

    @property
    def listeners(self) -> list[EndPoint]:
        return parse_endpoints("listeners", self._values["listeners"], self.listener_security_protocol_map)

    @cached_property
    def advertised_listeners(self) -> list[EndPoint]:
        """advertised.listeners, else listeners; an empty host becomes this machine's name."""
        entries = self._values["advertised.listeners"]
        endpoints = (parse_endpoints("advertised.listeners", entries, self.listener_security_protocol_map)
                     if entries is not None else self.listeners)
        return [ep if ep.host else EndPoint(ep.listener_name, canonical_hostname(), ep.port, ep.security_protocol)
                for ep in endpoints]

    @property
    def inter_broker_listener_name(self) -> str:
        name = self._values["inter.broker.listener.name"]
        return name.upper() if name else self._values["security.inter.broker.protocol"]

    @property
    def inter_broker_endpoint(self) -> EndPoint:
        """The advertised endpoint of the inter-broker listener (its security protocol says how to connect)."""
        name = self.inter_broker_listener_name
        return next(ep for ep in self.advertised_listeners if ep.listener_name == name)

    def listener_value(self, listener_name: str, key: str, mechanism: str | None = None) -> Any:
        """A key's value on one listener: ``listener.name.<listener>.<mechanism>.<key>``, then
        ``listener.name.<listener>.<key>``, then the broker-wide key (Kafka's listener-prefixed configs)."""
        overrides = self._listener_values.get(listener_name.lower(), {})
        if mechanism is not None and f"{mechanism.lower()}.{key}" in overrides:
            return overrides[f"{mechanism.lower()}.{key}"]
        if key in overrides:
            return overrides[key]
        return self._values[key]

    def listener_is_set(self, listener_name: str, key: str) -> bool:
        return key in self._listener_values.get(listener_name.lower(), {}) or key in self.originals

    @property
    def log_dirs(self) -> list[str]:
        return _log_dirs(self._values)

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        value = self._values["zookeeper.connection.timeout.ms"]
        return self.zookeeper_session_timeout_ms if value is None else value

    @property
    def log_retention_ms(self) -> int:
        return self.topic_default("retention.ms")

    @property
    def log_roll_ms(self) -> int:
        return self.topic_default("segment.ms")

    @property
    def log_roll_jitter_ms(self) -> int:
        return self.topic_default("segment.jitter.ms")

    @property
    def log_flush_interval_ms(self) -> int:
        return self.topic_default("flush.ms")

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """Host or IP -> limit, from ``host:count,host:count``."""
        return parse_ip_overrides(self._values["max.connections.per.ip.overrides"])

    # --- topic-level defaults -------------------------------------------------------------
    def topic_default(self, topic_key: str) -> Any:
        """The broker-wide default of a topic config, from its highest-precedence synonym."""
        for broker_key in TOPIC_CONFIG_SYNONYMS[topic_key]:
            value = self._values[broker_key]
            if value is None:
                continue
            if broker_key in SYNONYM_TO_MS:
                value *= SYNONYM_TO_MS[broker_key]
            if topic_key == "retention.ms" and value < 0:
                return -1
            return value
        return None

    def topic_defaults(self) -> dict[str, Any]:
        """Topic key -> default value, e.g. {"segment.bytes": 1073741824, "retention.ms": 604800000}."""
        return {topic_key: self.topic_default(topic_key) for topic_key in TOPIC_CONFIG_SYNONYMS}

    def topic_synonyms(self, topic_key: str) -> list[tuple[str, Any]]:
        """(broker key, value) of the synonyms that are set or have a default, precedence order."""
        return [(k, self._values[k]) for k in TOPIC_CONFIG_SYNONYMS[topic_key] if self._values[k] is not None]

    # --- cross-key validation (KafkaConfig.validateValues) ------------------------------
    @classmethod
    def _validate(cls, v: Mapping[str, Any], originals: Mapping[str, Any]) -> None:
        if v["process.roles"]:
            raise ConfigError("process.roles", "KRaft mode is not supported; this broker runs in ZooKeeper mode")
        if not v["zookeeper.connect"]:
            raise ConfigError("zookeeper.connect", "missing required configuration which has no default value")
        if v["broker.id.generation.enable"]:
            if not -1 <= v["broker.id"] <= v["reserved.broker.max.id"]:
                raise ConfigError("broker.id", "must be greater than or equal to -1 and not greater than reserved.broker.max.id")
        elif v["broker.id"] < 0:
            raise ConfigError("broker.id", "must be greater than or equal to 0")
        if not _log_dirs(v):
            raise ConfigError("log.dirs", "at least one log directory must be defined")
        roll_ms = v["log.roll.ms"]
        if roll_ms is not None and roll_ms < 1:
            raise ConfigError("log.roll.ms", "must be greater than or equal to 1")
        retention = [(k, v[k]) for k in TOPIC_CONFIG_SYNONYMS["retention.ms"] if v[k] is not None][0]
        if retention[1] == 0:
            raise ConfigError(retention[0], "must be unlimited (-1) or, equal or greater than 1")
        if 0 < v["queued.max.request.bytes"] < v["socket.request.max.bytes"]:
            raise ConfigError("queued.max.request.bytes", "must be larger or equal to socket.request.max.bytes")
        overrides = parse_ip_overrides(v["max.connections.per.ip.overrides"])
        if v["max.connections.per.ip"] == 0 and not overrides:
            raise ConfigError("max.connections.per.ip",
                              "can be set to zero only if max.connections.per.ip.overrides is set")
        if v["replica.fetch.wait.max.ms"] > v["replica.socket.timeout.ms"]:
            raise ConfigError("replica.socket.timeout.ms", "should always be at least replica.fetch.wait.max.ms")
        if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
            raise ConfigError("replica.fetch.wait.max.ms", "should always be less than or equal to replica.lag.time.max.ms")
        cls._validate_listeners(v, originals)

    @staticmethod
    def _validate_listeners(v: Mapping[str, Any], originals: Mapping[str, Any]) -> None:
        protocol_map = parse_protocol_map("listener.security.protocol.map", v["listener.security.protocol.map"])
        listeners = parse_endpoints("listeners", v["listeners"], protocol_map)
        names = [ep.listener_name for ep in listeners]
        if len(set(names)) != len(names):
            raise ConfigError("listeners", f"each listener must have a different name: {v['listeners']}")
        ports = [ep.port for ep in listeners if ep.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError("listeners", f"each listener must have a different port: {v['listeners']}")
        advertised = listeners
        if v["advertised.listeners"] is not None:
            advertised = parse_endpoints("advertised.listeners", v["advertised.listeners"], protocol_map)
            for ep in advertised:
                if ep.listener_name not in names:
                    raise ConfigError("advertised.listeners", f"listener {ep.listener_name} is not in listeners")
            adv_names = [ep.listener_name for ep in advertised]
            if len(set(adv_names)) != len(adv_names):
                raise ConfigError("advertised.listeners", "each listener must have a different name")
        # Checked on the effective list, so listeners=...0.0.0.0 needs advertised.listeners.
        if any(ep.host == "0.0.0.0" for ep in advertised):
            raise ConfigError("advertised.listeners",
                              "cannot use the nonroutable meta-address 0.0.0.0; use a routable IP address")
        if v["inter.broker.listener.name"] and "security.inter.broker.protocol" in originals:
            raise ConfigError("inter.broker.listener.name",
                              "only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
        inter = (v["inter.broker.listener.name"] or v["security.inter.broker.protocol"]).upper()
        if inter not in {ep.listener_name for ep in advertised}:
            raise ConfigError("inter.broker.listener.name",
                              f"must be a listener name defined in advertised.listeners; "
                              f"the valid options are {', '.join(ep.listener_name for ep in advertised)}")
        inter_protocol = protocol_map[inter]
        if inter_protocol.startswith("SASL_"):
            overrides = _parse_listener_overrides(originals).get(inter.lower(), {})
            enabled = overrides.get("sasl.enabled.mechanisms", v["sasl.enabled.mechanisms"])
            if v["sasl.mechanism.inter.broker.protocol"] not in enabled:
                raise ConfigError("sasl.mechanism.inter.broker.protocol",
                                  "must be included in sasl.enabled.mechanisms when SASL is used for "
                                  "inter-broker communication")


def listener_config_base(key: str) -> str | None:
    """The base key of a listener-prefixed key (``listener.name.ssl.ssl.keystore.location`` ->
    ``ssl.keystore.location``, mechanism dropped), None for any other key."""
    parsed = _listener_override(key)
    if parsed is None:
        return None
    rest = parsed[1]
    return rest if rest in CONFIG_KEYS else rest.partition(".")[2]


def _listener_override(key: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<key>`` -> (listener lower-case, key), None for any other key.

    The key may carry a SASL mechanism first (``scram-sha-256.sasl.jaas.config``)."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    listener, _, rest = key[len(LISTENER_PREFIX):].partition(".")
    base = rest
    if rest and not rest.startswith(LISTENER_OVERRIDABLE_PREFIXES):
        base = rest.partition(".")[2]  # <mechanism>.<key>
    if not listener or not base.startswith(LISTENER_OVERRIDABLE_PREFIXES) or base not in CONFIG_KEYS:
        return None
    return listener.lower(), rest


def _parse_listener_overrides(props: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """listener (lower-case) -> {key or "<mechanism>.<key>": typed value}, parsed as the base key is."""
    result: dict[str, dict[str, Any]] = {}
    for raw_key, raw in props.items():
        parsed = _listener_override(raw_key)
        if parsed is None:
            continue
        listener, key = parsed
        base = key if key in CONFIG_KEYS else key.partition(".")[2]
        mechanism, _, _ = key.rpartition("." + base) if key != base else ("", "", "")
        try:
            value = CONFIG_KEYS[base].parse(raw)
        except ConfigError as exc:
            raise ConfigError(raw_key, str(exc).split(": ", 1)[-1]) from None
        result.setdefault(listener, {})[f"{mechanism.lower()}.{base}" if mechanism else base] = value
    return result


def _log_dirs(values: Mapping[str, Any]) -> list[str]:
    """log.dirs, else log.dir, as a list."""
    raw = values["log.dirs"] if values["log.dirs"] is not None else values["log.dir"]
    return [d.strip() for d in raw.split(",") if d.strip()]
