"""DynamicBrokerConfig: the broker's config in layers, as Kafka's DynamicBrokerConfig keeps it.

Precedence (highest first): per-broker dynamic (/config/brokers/<id>), cluster-wide dynamic
default (/config/brokers/<default>), static (server.properties), then ConfigDef defaults.
DescribeConfigs needs the layers to report sources and synonyms; AlterConfigs needs the rules
on which keys may change dynamically; the config change listener calls `apply` so the live
KafkaConfig follows ZooKeeper.
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from broker.config import KafkaConfig, listener_config_base
from broker.config_defs_unsupported import UNSUPPORTED_DYNAMIC_CONFIGS
from broker.config_defs import CONFIG_KEYS, LONG_MAX, TOPIC_CONFIG_SYNONYMS, ConfigError, ConfigKey, ConfigType, at_least
from broker.security.password_encoder import PasswordEncoderError, password_encoders
from broker.security.ssl_factory import RECONFIGURABLE_FIELDS, SslFactory, SslReconfigurationError, SslSettings
from coordination.zk_admin_data import DEFAULT_ENTITY
from storage.cleaner.cleaner_config import RECONFIGURABLE_CONFIGS as CLEANER_CONFIGS
from storage.cleaner.cleaner_config import CleanerConfig
from storage.errors import InvalidConfigError
from storage.log_config import broker_defaults

if TYPE_CHECKING:
    from broker.services import BrokerServices
    from storage.cleaner.log_cleaner import LogCleaner

log = logging.getLogger(__name__)


# Broker keys that supply topic defaults (Kafka's DynamicLogConfig: the primary synonym of
# each topic config, except the message format version).
_LOG_DYNAMIC = {keys[0] for keys in TOPIC_CONFIG_SYNONYMS.values()} - {"log.message.format.version"}
_TOPIC_DEFAULT_KEYS = frozenset(k for keys in TOPIC_CONFIG_SYNONYMS.values() for k in keys)
# Kafka's DynamicListenerConfig.ReconfigurableConfigs (security part): dynamic per broker, with or
# without a listener prefix; only the keystore and truststore ones (DYNAMIC_SECURITY_CONFIGS) take
# effect at once, the others at the next start, as in Kafka.
LISTENER_SECURITY_CONFIGS = frozenset({
    "principal.builder.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.service.name",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
})
# Kafka's DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): a listener's SslFactory reloads
# them, so they may only be given with a listener prefix.
DYNAMIC_SECURITY_CONFIGS = frozenset("ssl." + name.replace("_", ".") for name in RECONFIGURABLE_FIELDS)
PER_BROKER_CONFIGS = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"}) \
    | LISTENER_SECURITY_CONFIGS
# Listener-prefixed keys that may be set for the whole cluster (Kafka's ClusterLevelListenerConfigs).
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
DYNAMIC_CONFIGS = frozenset(
    _LOG_DYNAMIC
    | PER_BROKER_CONFIGS
    | {
        "num.io.threads", "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
        "background.threads", "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
        "max.connection.creation.rate", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms", "producer.id.expiration.ms", "transaction.partition.verification.enable",
    }
    | LISTENER_SECURITY_CONFIGS
    | UNSUPPORTED_DYNAMIC_CONFIGS
)
# Kafka's DynamicProducerStateManagerConfig: the settings every log's producer state reads live.
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})


# Kafka's DynamicConfig.Broker: broker-level dynamic keys outside KafkaConfig (replication throttles).
QUOTA_CONFIG_KEYS = {
    name: ConfigKey(name, ConfigType.LONG, LONG_MAX, at_least(0))
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "replica.alter.log.dirs.io.max.bytes.per.second")
}


class DynamicConfigError(ValueError):
    """Kafka's ConfigException from DynamicBrokerConfig.validate (answered as INVALID_REQUEST)."""


def _scala_set(names: set[str], kind: str = "Set") -> str:
    return f"{kind}({', '.join(sorted(names))})"


def _known(key: str) -> bool:
    """A key KafkaConfig takes: a broker key or a listener-prefixed one."""
    return key in CONFIG_KEYS or listener_config_base(key) is not None


def _definition(name: str) -> ConfigKey | None:
    """The definition of a broker key, listener-prefixed or not, or of a broker quota key."""
    return CONFIG_KEYS.get(listener_config_base(name) or name) or QUOTA_CONFIG_KEYS.get(name)


def is_password_config(name: str) -> bool:
    """A password (with or without a listener prefix): ZooKeeper keeps it encrypted."""
    key = _definition(name)
    return key is not None and key.type == ConfigType.PASSWORD


def synonym_group(name: str) -> tuple[str, ...]:
    """Kafka's brokerConfigSynonyms: e.g. log.retention.{ms,minutes,hours} for any of them."""
    for keys in TOPIC_CONFIG_SYNONYMS.values():
        if name in keys and len(keys) > 1:
            return keys
    return (name,)


class DynamicBrokerConfig:
    def __init__(self, config: KafkaConfig, static_props: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        source = config.originals if static_props is None else static_props
        self.static: dict[str, str] = {k: _raw(v) for k, v in source.items() if v is not None}
        self.per_broker: dict[str, str] = {}  # passwords decoded (ZooKeeper has them encrypted)
        self.defaults: dict[str, str] = {}
        self.password_encoder, self.old_password_encoder = password_encoders(config)
        # Kafka's BrokerReconfigurable log cleaner: validates and takes its settings' changes.
        self.log_cleaner: LogCleaner | None = None
        # Each SSL listener's SslFactories (its server side; the inter-broker client side too).
        self.ssl_factories: dict[str, list[SslFactory]] = {}
        self._ssl_lock = threading.Lock()  # the config change listener and AlterConfigs both reconfigure

    # --- layers ----------------------------------------------------------------------------
    def effective_raw(self, name: str) -> str | None:
        for layer in (self.per_broker, self.defaults, self.static):
            if name in layer:
                return layer[name]
        return None

    def effective_props(self) -> dict[str, str]:
        return {**self.static, **self.defaults, **self.per_broker}

    def effective_config(self) -> KafkaConfig:
        """A KafkaConfig of the effective values (known keys only), for typed lookups."""
        props = {k: v for k, v in self.effective_props().items() if k in CONFIG_KEYS}
        try:
            return KafkaConfig(props)
        except ConfigError:
            return self.config

    def static_default(self, name: str) -> Any:
        key = CONFIG_KEYS.get(name)
        return None if key is None else key.default

    # --- AlterConfigs ------------------------------------------------------------------------
    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validate: dynamic keys only, typed values, and the
        resulting whole config must still be valid."""
        non_dynamic = {k for k in props if k in CONFIG_KEYS and k not in DYNAMIC_CONFIGS}
        if non_dynamic:
            raise DynamicConfigError(f"Cannot update these configs dynamically: {_scala_set(non_dynamic)}")
        unprefixed = set(props) & DYNAMIC_SECURITY_CONFIGS
        if unprefixed:
            raise DynamicConfigError("These security configs can be dynamically updated only per-listener using the "
                                     f"listener prefix: {_scala_set(unprefixed, 'HashSet')}")
        for name, value in props.items():
            key = CONFIG_KEYS.get(name) or QUOTA_CONFIG_KEYS.get(name)
            if key is not None:
                try:
                    key.parse(value)
                except ConfigError as exc:
                    raise DynamicConfigError(str(exc)) from None
        if not per_broker:
            only_per_broker = (set(props) & PER_BROKER_CONFIGS) | {
                k for k in props if (match := LISTENER_CONFIG.fullmatch(k))
                and match.group(1) not in CLUSTER_LEVEL_LISTENER_CONFIGS}
            if only_per_broker:
                raise DynamicConfigError(
                    "Cannot update these configs at default cluster level, broker id must be specified: "
                    f"{_scala_set(only_per_broker)}"
                )
        new_config = self._config_with(props, per_broker)
        try:
            for factory, settings in self._ssl_updates(new_config):
                factory.validate_reconfiguration(settings)
        except SslReconfigurationError as exc:
            raise DynamicConfigError(_invalid_dynamic(exc)) from None
        if self.log_cleaner is not None and set(props) & CLEANER_CONFIGS:
            try:
                self.log_cleaner.validate_reconfiguration(CleanerConfig.from_props(new_config.values()))
            except InvalidConfigError as exc:
                raise DynamicConfigError(str(exc)) from None

    def _config_with(self, props: Mapping[str, str], per_broker: bool) -> KafkaConfig:
        """The whole config once ``props`` replace this broker's (or the cluster's) dynamic configs."""
        merged = dict(self.static)
        if per_broker:
            merged.update(self.defaults)
            merged.update(props)
        else:
            merged.update(props)
            merged.update(self.per_broker)
        try:
            return KafkaConfig({k: v for k, v in merged.items() if _known(k)})
        except ConfigError as exc:
            raise DynamicConfigError(str(exc)) from None

    # --- passwords in ZooKeeper (Kafka's toPersistentProps / fromPersistentProps) ---------------
    def to_persistent(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """``props`` as ZooKeeper keeps them: passwords encrypted with ``password.encoder.secret``.
        Raises PasswordEncoderError with Kafka's message where it refuses to store one."""
        stored = dict(props)
        for name, value in props.items():
            if is_password_config(name):
                if not per_broker:
                    raise PasswordEncoderError("Password config can be defined only at broker level")
                if self.password_encoder is None:
                    raise PasswordEncoderError("Password encoder secret not configured")
                stored[name] = self.password_encoder.encode(value)
        return stored

    def from_persistent(self, stored: Mapping[str, str]) -> dict[str, str]:
        """A ZooKeeper entity config with its passwords decoded; one that cannot be is left out, as Kafka does."""
        props = {}
        for name, value in stored.items():
            if is_password_config(name):
                try:
                    if self.password_encoder is None:
                        raise PasswordEncoderError("Password encoder secret not configured")
                    value = self.password_encoder.decode(value)
                except PasswordEncoderError as exc:
                    log.error("Dynamic password config %s could not be decoded, ignoring: %s", name, exc)
                    continue
            props[name] = value
        return props

    def reencoded_passwords(self, stored: Mapping[str, str]) -> dict[str, str] | None:
        """Kafka's maybeReEncodePasswords: the entity config with the passwords that
        ``password.encoder.old.secret`` encoded encoded again with the current secret; None if none."""
        if self.password_encoder is None or self.old_password_encoder is None:
            return None
        updated, changed = dict(stored), False
        for name, value in stored.items():
            if not is_password_config(name):
                continue
            try:
                self.password_encoder.decode(value)
            except PasswordEncoderError:
                try:
                    updated[name] = self.password_encoder.encode(self.old_password_encoder.decode(value))
                    changed = True
                except PasswordEncoderError:
                    log.error("Dynamic password config %s could be decoded with neither secret", name)
        return updated if changed else None

    # --- SSL listeners (Kafka's reconfigurable SslFactory) -------------------------------------
    def _ssl_updates(self, config: KafkaConfig, listeners: Iterable[str] | None = None
                     ) -> list[tuple[SslFactory, SslSettings]]:
        """Each SSL factory (of ``listeners``, else all) with its listener's settings under ``config``."""
        updates = []
        for listener, factories in self.ssl_factories.items():
            if listeners is None or listener in listeners:
                settings = SslSettings.for_listener(config, listener)
                updates.extend((factory, settings) for factory in factories)
        return updates

    def reconfigure_ssl(self) -> None:
        """Give every SSL listener the live config's keystore and truststore (after ``apply``); a
        refused one is logged and the listener keeps its context, as in Kafka."""
        with self._ssl_lock:
            for factory, settings in self._ssl_updates(self.config):
                try:
                    factory.reconfigure(settings)
                except SslReconfigurationError as exc:
                    log.error("Failed to reconfigure the SSL context of listener %s: %s", settings.listener, exc)

    def reload_updated_files(self, props: Mapping[str, str]) -> None:
        """Kafka's reloadUpdatedFilesWithoutConfigChange, after a per-broker AlterConfigs of ours
        wrote ``props``: a listener whose keystore or truststore keys they name takes them now,
        reloading files whose contents changed under an unchanged name (whether or not the config
        change listener has applied them yet: the settings come from ``props``, and both take the
        same lock). Raises DynamicConfigError if the new files are refused."""
        named = {k.split(".")[2] for k in props if listener_config_base(k) in DYNAMIC_SECURITY_CONFIGS}
        listeners = [listener for listener in self.ssl_factories if listener.lower() in named]
        if not listeners:
            return
        config = self._config_with(props, per_broker=True)
        try:
            with self._ssl_lock:
                for factory, settings in self._ssl_updates(config, listeners):
                    factory.reconfigure(settings, reload=True)
        except SslReconfigurationError as exc:
            raise DynamicConfigError(_invalid_dynamic(exc)) from None

    # --- config change listener --------------------------------------------------------------
    def apply(self, entity_name: str, props: Mapping[str, str]) -> set[str]:
        """Take the new config of `/config/brokers/<entity_name>` (ours or <default>) and update
        the live KafkaConfig; returns the keys whose typed value changed. An invalid update is
        logged and ignored, as Kafka does."""
        props = self.from_persistent(props)
        if entity_name == DEFAULT_ENTITY:
            previous, self.defaults = self.defaults, dict(props)
        elif entity_name == str(self.broker_id):
            previous, self.per_broker = self.per_broker, dict(props)
        else:
            return set()
        touched = {k for k in set(previous) | set(props) if _known(k)}
        try:
            return self.config.update({k: self.effective_raw(k) for k in touched})
        except ConfigError as exc:
            log.error("ignoring dynamic broker config %s: %s", entity_name, exc)
            return set()


def loggable(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with the values of passwords (and of keys whose type is unknown) hidden, as Kafka logs them."""
    return {name: "[hidden]" if _definition(name) is None or is_password_config(name) else value
            for name, value in props.items()}


def _invalid_dynamic(exc: Exception) -> str:
    """How Kafka's ZooKeeper-mode AlterConfigs words a reconfiguration its validation refused."""
    return f"Invalid value org.apache.kafka.common.config.ConfigException: {exc} for configuration Invalid dynamic " \
        "configuration"


def _raw(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


async def current_dynamic_config(services: BrokerServices) -> DynamicBrokerConfig:
    """The broker's layered config: the live one when the server keeps it in
    `services.dynamic_config`, else built from the static config and ZooKeeper."""
    if services.dynamic_config is not None:
        return services.dynamic_config
    dyn = DynamicBrokerConfig(services.config)

    def load() -> tuple[dict[str, str], dict[str, str]]:
        return (services.zk.get_entity_config("brokers", str(services.broker_id)),
                services.zk.get_entity_config("brokers", DEFAULT_ENTITY))

    per_broker, defaults = await services.pool.run_blocking(load)
    dyn.per_broker, dyn.defaults = dyn.from_persistent(per_broker), dyn.from_persistent(defaults)
    dyn.log_cleaner = services.log_manager.cleaner
    return dyn


def install(services: BrokerServices, ssl_factories: Mapping[str, list[SslFactory]]) -> DynamicBrokerConfig:
    """Blocking (ZooKeeper reads): snapshot the static config, load this broker's and the
    cluster-wide dynamic configs, apply them and keep the result in `services.dynamic_config`. Call at
    startup before the config change listener starts; ``ssl_factories``: each SSL listener's."""
    dyn = DynamicBrokerConfig(services.config)
    dyn.log_cleaner = services.log_manager.cleaner
    dyn.ssl_factories = dict(ssl_factories)
    ours = str(services.broker_id)
    reencoded = dyn.reencoded_passwords(services.zk.get_entity_config("brokers", ours))
    if reencoded is not None:  # the secret changed: ZooKeeper gets the passwords under the new one
        log.info("Encoding the dynamic password configs of broker %s with the new password.encoder.secret", ours)
        services.admin_zk.change_configs("brokers", ours, reencoded)
    services.dynamic_config = dyn
    for entity in (DEFAULT_ENTITY, str(services.broker_id)):
        on_broker_config_change(services, entity, services.zk.get_entity_config("brokers", entity))
    return dyn


def on_broker_config_change(services: BrokerServices, entity_name: str, config: Mapping[str, str]) -> None:
    """The config change listener's handler for `brokers/<entity_name>`: update the live
    KafkaConfig and, when a topic default changed, every log's config."""
    dyn = services.dynamic_config
    if dyn is None:
        return
    changed = dyn.apply(entity_name, config)
    if changed & _TOPIC_DEFAULT_KEYS:
        log_manager = services.log_manager
        log_manager.default_config = broker_defaults(services.config.values())
        for topic in {t for t, _ in log_manager.all_logs()}:
            log_manager.update_topic_config(topic, log_manager.topic_configs.get(topic, {}))
    if changed & PRODUCER_STATE_CONFIGS:
        reconfigure_producer_state(services)
    cleaner = services.log_manager.cleaner
    if changed & CLEANER_CONFIGS and cleaner is not None:
        try:
            cleaner.reconfigure(CleanerConfig.from_props(services.config.values()))
        except (InvalidConfigError, ValueError) as exc:  # Kafka logs a failed reconfiguration
            log.error("failed to reconfigure the log cleaner: %s", exc)
    if any(listener_config_base(k) in DYNAMIC_SECURITY_CONFIGS for k in changed):
        dyn.reconfigure_ssl()
    if changed:
        log.info("Applied dynamic broker config %s: changed %s", entity_name, sorted(changed))


def reconfigure_producer_state(services: BrokerServices) -> None:
    """Every log shares one ProducerStateManagerConfig: changing it in place reaches them all, as
    Kafka's DynamicProducerStateManagerConfig does (the next append and expiry check use it)."""
    shared = services.log_manager.producer_state_config
    shared.producer_id_expiration_ms = services.config.get("producer.id.expiration.ms")
    shared.transaction_verification_enabled = services.config.get("transaction.partition.verification.enable")
    log.info("Producer state: producer.id.expiration.ms %d, transaction.partition.verification.enable %s",
             shared.producer_id_expiration_ms, shared.transaction_verification_enabled)
