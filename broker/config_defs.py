"""Kafka 3.9 broker configuration keys: name, type, default and validator.

Names and defaults follow Kafka's ServerConfigs, ServerLogConfigs, SocketServerConfigs,
ReplicationConfigs, ZkConfigs, GroupCoordinatorConfig and TransactionLogConfig, so a
server.properties written for Kafka means the same thing here. ``ConfigType`` uses the
numbering of the DescribeConfigs response so handlers can report types directly.
Keys of features this broker does not have are known too (``config_defs_unsupported``), as
in Kafka; anything else is reported as unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from broker.config_defs_unsupported import UNSUPPORTED_CONFIGS


_NO_VALUE = object()


class ConfigError(ValueError):
    """A configuration value that stops the broker from starting (names the key). For a bad
    value the text is Kafka's ConfigException: "Invalid value V for configuration K: reason"."""

    def __init__(self, key: str, message: str, value: Any = _NO_VALUE) -> None:
        if value is _NO_VALUE:
            super().__init__(f"{key}: {message}")
        else:
            super().__init__(f"Invalid value {java_string(value)} for configuration {key}: {message}")
        self.key = key


class ConfigType(IntEnum):
    """Value types, numbered as in DescribeConfigsResponse.ConfigType."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308

_INT_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), INT_MAX),
    ConfigType.LONG: (-(2**63), LONG_MAX),
}
_LIST_SPLIT = re.compile(r"\s*,\s*")

Validator = Callable[[str, Any], None]


def java_double(value: float) -> str:
    """Java's Double.toString for the values configs use (0.5, 1.0, 1.7976931348623157E308)."""
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        mantissa, exponent = f"{value!r}".lower().split("e") if "e" in repr(value) else (repr(value), "0")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}E{int(exponent)}"
    text = repr(value)
    return text if "." in text else text + ".0"


def java_string(value: Any) -> str:
    """A value as Java prints it in Kafka's config messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def parse_value(key: str, config_type: ConfigType, raw: Any) -> Any:
    """Convert a properties string (or an already typed value) the way Kafka's ConfigDef does,
    failing with its messages."""
    if raw is None:
        return None
    if config_type == ConfigType.PASSWORD:
        return str(raw)
    if config_type == ConfigType.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(item) for item in raw]
        text = str(raw).strip()
        return [] if not text else _LIST_SPLIT.split(text)
    if config_type in (ConfigType.STRING, ConfigType.CLASS):
        return str(raw).strip()
    if config_type == ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(key, "Expected value to be either true or false", raw)
        return text == "true"
    not_a_number = f"Not a number of type {config_type.name}"
    if config_type == ConfigType.DOUBLE:
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(key, not_a_number, raw) from None
    lo, hi = _INT_RANGES[config_type]
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise ConfigError(key, not_a_number, raw)
    try:
        value = int(raw.strip()) if isinstance(raw, str) else raw
    except ValueError:
        raise ConfigError(key, not_a_number, raw) from None
    if not lo <= value <= hi:
        raise ConfigError(key, not_a_number, raw)
    return value


def at_least(minimum: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(key, f"Value must be at least {minimum}", value)
    return check


def between(lo: float, hi: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value < lo:
            raise ConfigError(key, f"Value must be at least {lo}", value)
        if value is not None and value > hi:
            raise ConfigError(key, f"Value must be no more than {hi}", value)
    return check


def one_of(*choices: str) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value not in choices:
            raise ConfigError(key, f"String must be one of: {', '.join(choices)}", value)
    return check


def each_of(*choices: str) -> Validator:
    """For LIST values: every item must be one of ``choices`` (Kafka's ValidList names the item)."""
    def check(key: str, value: Any) -> None:
        for item in value or ():
            if item not in choices:
                raise ConfigError(key, f"String must be one of: {', '.join(choices)}", item)
    return check


def gzip_level(key: str, value: Any) -> None:
    if value != -1 and not 1 <= value <= 9:
        raise ConfigError(key, "Value must be between 1 and 9 or equal to -1", value)


_HTTP_LISTENER = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_http_listener(key: str, text: str) -> tuple[str, int]:
    """``http://host:port`` (an empty host binds every interface) as (host, port), checked the way
    Kafka checks a listener: the whole string must parse, the port must be a port."""
    match = _HTTP_LISTENER.match(text.strip())
    if not match:
        raise ConfigError(key, f"unable to parse {text!r} as a listener (expected http://host:port)")
    scheme, host, port = match.group(1), match.group(2), int(match.group(3))
    if scheme.lower() != "http":
        raise ConfigError(key, f"unsupported scheme {scheme!r} in {text!r}: only http is served")
    if not 0 <= port <= 65535:
        raise ConfigError(key, f"invalid port {port} in {text!r}")
    return host, port


def _http_listener(key: str, value: Any) -> None:
    if value:
        parse_http_listener(key, value)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any  # already typed (None: no default)
    validator: Validator | None = None

    def parse(self, raw: Any) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1", "TLS")
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
# Keys a listener can override as listener.name.<listener lower-case>.<key> (Kafka's reconfigurable
# listener configs: SSL, SASL and connections.max.reauth.ms); SASL ones also per mechanism.
LISTENER_PREFIX = "listener.name."
LISTENER_OVERRIDABLE_PREFIXES = ("ssl.", "sasl.", "connections.max.reauth.ms")
# Kafka builds this from a HashMap of SecurityProtocol values; this is the order 3.9 prints.
DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

B, S, I, SH, L, D, LI, C, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT,
                               ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS,
                               ConfigType.PASSWORD)

_DEFINITIONS: Sequence[tuple[str, ConfigType, Any, Validator | None]] = (
    # --- broker identity and ZooKeeper
    ("broker.id", I, -1, None),
    ("node.id", I, -1, None),  # broker.id's synonym (KafkaConfig.populateSynonyms)
    ("broker.id.generation.enable", B, True, None),
    ("reserved.broker.max.id", I, 1000, at_least(0)),
    ("broker.rack", S, None, None),
    ("process.roles", LI, [], each_of("broker", "controller")),
    ("zookeeper.connect", S, None, None),
    ("zookeeper.session.timeout.ms", I, 18000, None),
    ("zookeeper.connection.timeout.ms", I, None, None),
    ("zookeeper.max.in.flight.requests", I, 10, at_least(1)),
    ("zookeeper.set.acl", B, False, None),
    # TLS to ZooKeeper (broker.security.ssl_factory.zookeeper_client_context)
    ("zookeeper.ssl.client.enable", B, False, None),
    ("zookeeper.clientCnxnSocket", S, None, None),  # Java's Netty socket for TLS; ours always can
    ("zookeeper.ssl.keystore.location", S, None, None),
    ("zookeeper.ssl.keystore.password", P, None, None),
    ("zookeeper.ssl.keystore.type", S, None, None),
    ("zookeeper.ssl.truststore.location", S, None, None),
    ("zookeeper.ssl.truststore.password", P, None, None),
    ("zookeeper.ssl.truststore.type", S, None, None),
    ("zookeeper.ssl.protocol", S, "TLSv1.2", None),
    ("zookeeper.ssl.enabled.protocols", LI, None, None),
    ("zookeeper.ssl.cipher.suites", LI, None, None),
    ("zookeeper.ssl.endpoint.identification.algorithm", S, "HTTPS", None),
    ("zookeeper.ssl.crl.enable", B, False, None),
    ("zookeeper.ssl.ocsp.enable", B, False, None),
    ("zookeeper.metadata.migration.enable", B, False, None),
    ("inter.broker.protocol.version", S, "3.9-IV0", None),
    ("unstable.api.versions.enable", B, False, None),
    ("request.timeout.ms", I, 30000, at_least(0)),
    ("background.threads", I, 10, at_least(1)),
    ("controlled.shutdown.enable", B, True, None),
    ("controlled.shutdown.max.retries", I, 3, None),
    ("controlled.shutdown.retry.backoff.ms", L, 5000, None),
    ("controller.socket.timeout.ms", I, 30000, None),
    ("delete.topic.enable", B, True, None),
    ("auto.create.topics.enable", B, True, None),
    ("num.partitions", I, 1, at_least(1)),
    ("default.replication.factor", I, 1, None),
    ("message.max.bytes", I, 1048588, at_least(0)),
    ("compression.type", S, "producer", one_of(*COMPRESSION_TYPES)),
    ("compression.gzip.level", I, -1, gzip_level),
    ("compression.lz4.level", I, 9, between(1, 17)),
    ("compression.zstd.level", I, 3, between(-131072, 22)),
    ("fetch.max.bytes", I, 57671680, at_least(1024)),
    ("max.incremental.fetch.session.cache.slots", I, 1000, at_least(0)),
    ("authorizer.class.name", S, "", None),
    ("super.users", S, "", None),
    ("allow.everyone.if.no.acl.found", B, False, None),
    ("principal.builder.class", C, DEFAULT_PRINCIPAL_BUILDER, one_of(DEFAULT_PRINCIPAL_BUILDER)),
    # --- socket server
    ("listeners", S, "PLAINTEXT://:9092", None),
    ("advertised.listeners", S, None, None),
    ("listener.security.protocol.map", S, DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP, None),
    ("inter.broker.listener.name", S, None, None),
    ("security.inter.broker.protocol", S, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS)),
    ("num.network.threads", I, 3, at_least(1)),
    ("num.io.threads", I, 8, at_least(1)),
    ("queued.max.requests", I, 500, at_least(1)),
    ("queued.max.request.bytes", L, -1, None),
    ("socket.send.buffer.bytes", I, 102400, None),
    ("socket.receive.buffer.bytes", I, 102400, None),
    ("socket.request.max.bytes", I, 104857600, at_least(1)),
    ("socket.listen.backlog.size", I, 50, at_least(1)),
    ("max.connections", I, INT_MAX, at_least(0)),
    ("max.connections.per.ip", I, INT_MAX, at_least(0)),
    ("max.connections.per.ip.overrides", S, "", None),
    ("max.connection.creation.rate", I, INT_MAX, at_least(0)),
    ("quota.window.num", I, 11, at_least(1)),
    ("quota.window.size.seconds", I, 1, at_least(1)),
    ("connections.max.idle.ms", L, 600000, None),
    ("connection.failed.authentication.delay.ms", I, 100, at_least(0)),
    ("connections.max.reauth.ms", L, 0, None),
    # --- TLS (also per listener: listener.name.<listener>.ssl.*)
    ("ssl.protocol", S, "TLSv1.3", one_of(*TLS_PROTOCOLS)),
    ("ssl.enabled.protocols", LI, ["TLSv1.2", "TLSv1.3"], each_of(*TLS_PROTOCOLS)),
    ("ssl.cipher.suites", LI, [], None),
    ("ssl.client.auth", S, "none", one_of("required", "requested", "none")),
    ("ssl.keystore.type", S, "JKS", None),
    ("ssl.keystore.location", S, None, None),
    ("ssl.keystore.password", P, None, None),
    ("ssl.keystore.key", P, None, None),
    ("ssl.keystore.certificate.chain", P, None, None),
    ("ssl.key.password", P, None, None),
    ("ssl.truststore.type", S, "JKS", None),
    ("ssl.truststore.location", S, None, None),
    ("ssl.truststore.password", P, None, None),
    ("ssl.truststore.certificates", P, None, None),
    ("ssl.endpoint.identification.algorithm", S, "https", None),
    ("ssl.principal.mapping.rules", S, "DEFAULT", None),
    ("ssl.keymanager.algorithm", S, "SunX509", None),
    ("ssl.trustmanager.algorithm", S, "PKIX", None),
    ("ssl.secure.random.implementation", S, None, None),
    ("ssl.engine.factory.class", C, None, None),
    ("ssl.allow.dn.changes", B, False, None),  # a dynamic keystore update may change the certificate's DN
    ("ssl.allow.san.changes", B, False, None),  # ... or drop some of its SubjectAltNames
    # --- dynamic password configs, encrypted in ZooKeeper (broker.security.password_encoder)
    ("password.encoder.secret", P, None, None),
    ("password.encoder.old.secret", P, None, None),
    ("password.encoder.keyfactory.algorithm", S, None, None),
    ("password.encoder.cipher.algorithm", S, "AES/CBC/PKCS5Padding", None),
    ("password.encoder.key.length", I, 128, at_least(8)),
    ("password.encoder.iterations", I, 4096, at_least(1024)),
    # --- delegation tokens (broker.security.delegation_token_manager)
    ("delegation.token.secret.key", P, None, None),
    ("delegation.token.master.key", P, None, None),  # deprecated name of the secret key
    ("delegation.token.max.lifetime.ms", L, 604800000, at_least(1)),
    ("delegation.token.expiry.time.ms", L, 86400000, at_least(1)),
    ("delegation.token.expiry.check.interval.ms", L, 3600000, at_least(1)),
    # --- SASL (also per listener and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config)
    ("sasl.enabled.mechanisms", LI, ["GSSAPI"], None),
    ("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", None),
    ("sasl.jaas.config", P, None, None),
    ("sasl.server.max.receive.size", I, 524288, None),
    ("sasl.kerberos.service.name", S, None, None),
    ("sasl.server.callback.handler.class", C, None, None),
    ("sasl.login.callback.handler.class", C, None, None),
    # OAUTHBEARER tokens signed by an identity provider (KIP-768; broker.security.oauthbearer_jwks)
    ("sasl.oauthbearer.jwks.endpoint.url", S, None, None),
    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", L, 3600000, at_least(0)),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", L, 100, at_least(0)),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", L, 10000, at_least(0)),
    ("sasl.oauthbearer.clock.skew.seconds", I, 30, at_least(0)),
    ("sasl.oauthbearer.expected.audience", LI, None, None),
    ("sasl.oauthbearer.expected.issuer", S, None, None),
    ("sasl.oauthbearer.scope.claim.name", S, "scope", None),
    ("sasl.oauthbearer.sub.claim.name", S, "sub", None),
    # ... and this broker's own login with one (OAuthBearerLoginCallbackHandler; broker.security.oauthbearer_login)
    ("sasl.oauthbearer.token.endpoint.url", S, None, None),
    ("sasl.login.connect.timeout.ms", I, None, None),
    ("sasl.login.read.timeout.ms", I, None, None),
    ("sasl.login.retry.backoff.ms", L, 100, None),
    ("sasl.login.retry.backoff.max.ms", L, 10000, None),
    ("sasl.login.refresh.window.factor", D, 0.8, between(0.5, 1.0)),
    ("sasl.login.refresh.window.jitter", D, 0.05, between(0.0, 0.25)),
    ("sasl.login.refresh.min.period.seconds", SH, 60, between(0, 900)),
    ("sasl.login.refresh.buffer.seconds", SH, 300, between(0, 3600)),
    # --- client quotas (ClientQuotaManagerConfig, ControllerMutationQuotaManager; quota.window.* above)
    ("controller.quota.window.num", I, 11, at_least(1)),
    ("controller.quota.window.size.seconds", I, 1, at_least(1)),
    # replication throttles (leader/follower) and moves between log dirs
    ("replication.quota.window.num", I, 11, at_least(1)),
    ("replication.quota.window.size.seconds", I, 1, at_least(1)),
    ("alter.log.dirs.replication.quota.window.num", I, 11, at_least(1)),
    ("alter.log.dirs.replication.quota.window.size.seconds", I, 1, at_least(1)),
    ("client.quota.callback.class", C, None, None),
    # --- logs
    ("log.dir", S, "/tmp/kafka-logs", None),
    ("log.dirs", S, None, None),
    ("log.segment.bytes", I, 1024 * 1024 * 1024, at_least(14)),  # LegacyRecord.RECORD_OVERHEAD_V0
    ("log.roll.hours", I, 24 * 7, at_least(1)),
    ("log.roll.ms", L, None, None),
    ("log.roll.jitter.hours", I, 0, at_least(0)),
    ("log.roll.jitter.ms", L, None, None),
    ("log.retention.hours", I, 24 * 7, None),
    ("log.retention.minutes", I, None, None),
    ("log.retention.ms", L, None, None),
    ("log.retention.bytes", L, -1, None),
    ("log.local.retention.ms", L, -2, at_least(-2)),
    ("log.local.retention.bytes", L, -2, at_least(-2)),
    ("log.retention.check.interval.ms", L, 5 * 60 * 1000, at_least(1)),
    ("log.cleanup.policy", LI, ["delete"], each_of(*CLEANUP_POLICIES)),
    ("log.index.size.max.bytes", I, 10 * 1024 * 1024, at_least(4)),
    ("log.index.interval.bytes", I, 4096, at_least(0)),
    ("log.flush.interval.messages", L, LONG_MAX, at_least(1)),
    ("log.flush.interval.ms", L, None, None),
    ("log.flush.scheduler.interval.ms", L, LONG_MAX, None),
    ("log.flush.offset.checkpoint.interval.ms", I, 60000, at_least(0)),
    ("log.flush.start.offset.checkpoint.interval.ms", I, 60000, at_least(0)),
    ("log.segment.delete.delay.ms", L, 60000, at_least(0)),
    ("log.preallocate", B, False, None),
    ("log.message.format.version", S, "3.0-IV1", None),
    ("log.message.timestamp.type", S, "CreateTime", one_of(*TIMESTAMP_TYPES)),
    ("log.message.timestamp.difference.max.ms", L, LONG_MAX, at_least(0)),
    ("log.message.timestamp.before.max.ms", L, LONG_MAX, at_least(0)),
    ("log.message.timestamp.after.max.ms", L, LONG_MAX, at_least(0)),
    ("log.message.downconversion.enable", B, True, None),
    ("log.initial.task.delay.ms", L, 30000, at_least(0)),
    ("num.recovery.threads.per.data.dir", I, 1, at_least(1)),
    ("log.cleaner.enable", B, True, None),
    ("log.cleaner.threads", I, 1, at_least(0)),
    ("log.cleaner.io.max.bytes.per.second", D, DOUBLE_MAX, None),
    ("log.cleaner.dedupe.buffer.size", L, 128 * 1024 * 1024, None),
    ("log.cleaner.io.buffer.size", I, 512 * 1024, at_least(0)),
    ("log.cleaner.io.buffer.load.factor", D, 0.9, None),
    ("log.cleaner.backoff.ms", L, 15000, at_least(0)),
    ("log.cleaner.min.cleanable.ratio", D, 0.5, between(0, 1)),
    ("log.cleaner.delete.retention.ms", L, 24 * 60 * 60 * 1000, at_least(0)),
    ("log.cleaner.min.compaction.lag.ms", L, 0, at_least(0)),
    ("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, at_least(1)),
    ("min.insync.replicas", I, 1, at_least(1)),
    ("unclean.leader.election.enable", B, False, None),
    # --- replication
    ("replica.lag.time.max.ms", L, 30000, None),
    ("replica.socket.timeout.ms", I, 30000, None),
    ("replica.socket.receive.buffer.bytes", I, 64 * 1024, None),
    ("replica.fetch.max.bytes", I, 1024 * 1024, at_least(0)),
    ("replica.fetch.wait.max.ms", I, 500, None),
    ("replica.fetch.min.bytes", I, 1, None),
    ("replica.fetch.backoff.ms", I, 1000, at_least(0)),
    ("replica.fetch.response.max.bytes", I, 10 * 1024 * 1024, at_least(0)),
    ("replica.high.watermark.checkpoint.interval.ms", L, 5000, None),
    ("replica.selector.class", S, None, None),
    ("num.replica.fetchers", I, 1, None),
    ("num.replica.alter.log.dirs.threads", I, None, None),  # None: one per log dir, as Kafka
    ("fetch.purgatory.purge.interval.requests", I, 1000, None),
    ("producer.purgatory.purge.interval.requests", I, 1000, None),
    ("delete.records.purgatory.purge.interval.requests", I, 1, None),
    ("auto.leader.rebalance.enable", B, True, None),
    ("leader.imbalance.per.broker.percentage", I, 10, None),
    ("leader.imbalance.check.interval.seconds", L, 300, at_least(1)),
    # --- group coordinator
    ("group.min.session.timeout.ms", I, 6000, None),
    ("group.max.session.timeout.ms", I, 1800000, None),
    ("group.initial.rebalance.delay.ms", I, 3000, None),
    ("group.max.size", I, INT_MAX, at_least(1)),
    ("offset.metadata.max.bytes", I, 4096, None),
    # --- share groups (KIP-932), Kafka 4.2's defaults; group.share.enable is Kafka 4.0's switch
    ("group.share.enable", B, True, None),
    ("group.share.session.timeout.ms", I, 45000, at_least(1)),
    ("group.share.heartbeat.interval.ms", I, 5000, at_least(1)),
    ("group.share.max.size", SH, 200, between(1, 1000)),
    ("group.share.record.lock.duration.ms", I, 30000, between(1000, 3600000)),
    ("group.share.min.record.lock.duration.ms", I, 15000, between(1000, 30000)),
    ("group.share.max.record.lock.duration.ms", I, 60000, between(30000, 3600000)),
    ("group.share.min.session.timeout.ms", I, 45000, at_least(1)),
    ("group.share.max.session.timeout.ms", I, 60000, at_least(1)),
    ("group.share.min.heartbeat.interval.ms", I, 5000, at_least(1)),
    ("group.share.max.heartbeat.interval.ms", I, 15000, at_least(1)),
    ("group.share.delivery.count.limit", I, 5, between(2, 10)),
    ("group.share.partition.max.record.locks", I, 2000, between(100, 10000)),
    ("group.share.max.share.sessions", I, 2000, at_least(1)),
    ("share.coordinator.state.topic.num.partitions", I, 50, at_least(1)),
    ("share.coordinator.state.topic.replication.factor", SH, 3, at_least(1)),
    ("share.coordinator.state.topic.min.isr", SH, 2, at_least(1)),
    ("share.coordinator.state.topic.segment.bytes", I, 100 * 1024 * 1024, at_least(1)),
    ("share.coordinator.snapshot.update.records.per.snapshot", I, 500, between(0, 500)),
    ("share.coordinator.write.timeout.ms", I, 5000, at_least(1)),
    ("offsets.load.buffer.size", I, 5 * 1024 * 1024, at_least(1)),
    ("offsets.topic.num.partitions", I, 50, at_least(1)),
    ("offsets.topic.replication.factor", SH, 3, at_least(1)),
    ("offsets.topic.segment.bytes", I, 100 * 1024 * 1024, at_least(1)),
    ("offsets.topic.compression.codec", I, 0, between(0, 4)),
    ("offsets.retention.minutes", I, 7 * 24 * 60, at_least(1)),
    ("offsets.retention.check.interval.ms", L, 600000, at_least(1)),
    ("offsets.commit.timeout.ms", I, 5000, at_least(1)),
    # --- KIP-848 consumer groups (Kafka 4.2's GroupCoordinatorConfig)
    ("group.coordinator.rebalance.protocols", LI, ["classic", "consumer"],
     each_of("classic", "consumer", "share", "streams")),
    ("group.consumer.assignors", LI, ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor"], None),
    ("group.consumer.session.timeout.ms", I, 45000, at_least(1)),
    ("group.consumer.min.session.timeout.ms", I, 45000, at_least(1)),
    ("group.consumer.max.session.timeout.ms", I, 60000, at_least(1)),
    ("group.consumer.heartbeat.interval.ms", I, 5000, at_least(1)),
    ("group.consumer.min.heartbeat.interval.ms", I, 5000, at_least(1)),
    ("group.consumer.max.heartbeat.interval.ms", I, 15000, at_least(1)),
    ("group.consumer.max.size", I, INT_MAX, at_least(1)),
    ("group.consumer.migration.policy", S, "bidirectional",
     one_of("disabled", "downgrade", "upgrade", "bidirectional")),
    # --- transactions
    ("transaction.state.log.num.partitions", I, 50, at_least(1)),
    ("transaction.state.log.replication.factor", SH, 3, at_least(1)),
    ("transaction.state.log.segment.bytes", I, 100 * 1024 * 1024, at_least(1)),
    ("transaction.state.log.min.isr", I, 2, at_least(1)),
    ("transaction.state.log.load.buffer.size", I, 5 * 1024 * 1024, at_least(1)),
    ("transactional.id.expiration.ms", I, 7 * 24 * 3600 * 1000, at_least(1)),
    ("transaction.max.timeout.ms", I, 900000, at_least(1)),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, at_least(1)),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600 * 1000, at_least(1)),
    ("transaction.partition.verification.enable", B, True, None),
    ("producer.id.expiration.ms", I, 86400000, at_least(1)),
    ("producer.id.expiration.check.interval.ms", I, 600000, at_least(1)),
    # Not Kafka's: where this broker serves its metrics to Prometheus (empty: nowhere). Kafka
    # exposes JMX and leaves Prometheus to an agent (jmx_exporter) configured outside the broker.
    ("metrics.prometheus.listener", S, "", _http_listener),
)

CONFIG_KEYS: dict[str, ConfigKey] = {name: ConfigKey(name, t, d, v) for name, t, d, v in _DEFINITIONS}
# Kafka's too, for features this broker does not have (accepted and described, no effect).
UNSUPPORTED_KEYS = frozenset(name for name, _, _ in UNSUPPORTED_CONFIGS if name not in CONFIG_KEYS)
CONFIG_KEYS.update({name: ConfigKey(name, ConfigType[t], d) for name, t, d in UNSUPPORTED_CONFIGS
                    if name in UNSUPPORTED_KEYS})
# Kafka defines these as internal: DescribeConfigs lists them only when set.
# So are the share-group keys a Kafka 3.9 broker does not have (Kafka 4 lists them), so that a
# describe of this broker lists what a Kafka 3.9 broker lists.
INTERNAL_KEYS = frozenset({"log.initial.task.delay.ms", "producer.id.expiration.check.interval.ms",
                           "unstable.api.versions.enable", "group.share.enable", "group.share.max.share.sessions",
                           "share.coordinator.state.topic.num.partitions",
                           "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
                           "share.coordinator.state.topic.segment.bytes",
                           "share.coordinator.snapshot.update.records.per.snapshot",
                           "share.coordinator.write.timeout.ms"})
# Keys Kafka's KafkaConfig does not define (the AclAuthorizer's own, read from the broker's
# properties, and this broker's extensions): DescribeConfigs lists them only when set, as Kafka
# lists unknown keys (values hidden), so a describe of a broker lists what Kafka's lists.
NON_KAFKA_CONFIG_KEYS = frozenset({"super.users", "allow.everyone.if.no.acl.found", "metrics.prometheus.listener"})

# Topic-level config -> broker keys that supply its default, highest precedence first
# (Kafka's ServerTopicConfigSynonyms). Hour/minute synonyms are converted to ms.
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "message.format.version": ("log.message.format.version",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
}

# Multiplier to milliseconds for synonyms expressed in coarser units.
SYNONYM_TO_MS: dict[str, int] = {
    "log.roll.hours": 3600 * 1000,
    "log.roll.jitter.hours": 3600 * 1000,
    "log.retention.minutes": 60 * 1000,
    "log.retention.hours": 3600 * 1000,
}
