"""What each listener's connections go through before Kafka requests (Kafka's ChannelBuilders).

PLAINTEXT: nothing. SSL: the TLS handshake; the principal comes from the client certificate
(``ssl.principal.mapping.rules``) or is ANONYMOUS. SASL_PLAINTEXT / SASL_SSL: (TLS, then) SASL
with the listener's ``sasl.enabled.mechanisms``: PLAIN against the JAAS config's
``user_<name>`` entries, SCRAM against the credentials stored in ZooKeeper, OAUTHBEARER with
Kafka's default unsecured-token validation (``broker.security.oauthbearer``) or, with Kafka's
OAuthBearerValidatorCallbackHandler configured, signed tokens checked against the identity
provider's JWKS (``broker.security.oauthbearer_jwks``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from broker.config import EndPoint, KafkaConfig
from broker.config_defs import ConfigError
from broker.security.credential_cache import CredentialCache
from broker.security.jaas_context import server_login_modules
from broker.security.oauthbearer import OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE, UNSECURED_VALIDATOR_CLASS, \
    OAuthBearerServer, TokenValidator, UnsecuredValidator
from broker.security.oauthbearer_jwks import JWKS_VALIDATOR_CLASSES, JwksSettings, JwksValidator
from broker.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal, SslPrincipalMapper, certificate_subject
from broker.security.sasl_mechanism import PLAIN, PlainServer
from broker.security.sasl_server_authenticator import SaslListenerConfig, SaslServerFactory
from broker.security.scram import SCRAM_MECHANISMS, ScramServer
from broker.security.ssl_factory import SslFactory, SslSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListenerSecurity:
    endpoint: EndPoint
    ssl: SslFactory | None  # its context changes with dynamic keystore updates
    principal_mapper: SslPrincipalMapper
    sasl: SaslListenerConfig | None
    failed_authentication_delay_ms: int

    def ssl_principal(self, certificate: bytes | None) -> KafkaPrincipal:
        """The principal of a TLS client: its certificate's subject through the mapping rules."""
        if not certificate:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.principal_mapper.name(certificate_subject(certificate)))


def _plain_users(config: KafkaConfig, listener: str) -> dict[str, str]:
    found = server_login_modules(config, listener, PLAIN)
    if found is None:
        raise ConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config",
                          f"SASL/PLAIN is enabled on {listener} but no JAAS config names its users")
    return {user: password for module in found[0] for user, password in module.users().items()}


def _oauthbearer_validator(config: KafkaConfig, listener: str) -> TokenValidator:
    """Kafka's OAUTHBEARER validation for the listener: its default (unsecured tokens, options from
    the listener's JAAS config, which Kafka requires), or KIP-768's validator of signed tokens
    against a JWKS; any other server callback handler is refused rather than replaced by checks
    that would let in tokens it would refuse."""
    prefix = f"listener.name.{listener.lower()}.oauthbearer."

    def setting(key: str) -> Any:
        return config.listener_value(listener, key, OAUTHBEARER)

    handler = setting("sasl.server.callback.handler.class")
    found = server_login_modules(config, listener, OAUTHBEARER)
    if found is None:
        raise ConfigError(prefix + "sasl.jaas.config",
                          f"SASL/OAUTHBEARER is enabled on {listener} but it has no JAAS config "
                          f"({OAUTHBEARER_LOGIN_MODULE} required ...;)")
    modules, source = found
    options = modules[0].options
    if handler in JWKS_VALIDATOR_CLASSES:
        url = setting("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ConfigError(prefix + "sasl.oauthbearer.jwks.endpoint.url", f"{handler} needs the JWKS URL")
        validator = JwksValidator(JwksSettings(
            url, setting("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
            setting("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
            setting("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"),
            setting("sasl.oauthbearer.clock.skew.seconds"),
            tuple(setting("sasl.oauthbearer.expected.audience") or ()), setting("sasl.oauthbearer.expected.issuer"),
            setting("sasl.oauthbearer.sub.claim.name"), setting("sasl.oauthbearer.scope.claim.name")))
        try:
            validator.start()
        except ValueError as exc:
            raise ConfigError(prefix + "sasl.oauthbearer.jwks.endpoint.url", str(exc)) from None
        return validator
    if handler and handler != UNSECURED_VALIDATOR_CLASS:
        raise ConfigError(prefix + "sasl.server.callback.handler.class",
                          f"{handler} is not supported: OAUTHBEARER tokens are validated as Kafka's "
                          f"{UNSECURED_VALIDATOR_CLASS} or {JWKS_VALIDATOR_CLASSES[0]} does")
    try:
        return UnsecuredValidator(options)
    except ValueError as exc:
        raise ConfigError(source, str(exc)) from None


def _sasl_config(config: KafkaConfig, listener: str, credentials: CredentialCache) -> SaslListenerConfig:
    enabled = config.listener_value(listener, "sasl.enabled.mechanisms")
    factories: dict[str, SaslServerFactory] = {}
    for mechanism in enabled:
        if mechanism == PLAIN:
            users = _plain_users(config, listener)
            factories[mechanism] = partial(PlainServer, lambda user, password, users=users: users.get(user) == password)
        elif mechanism in SCRAM_MECHANISMS:
            factories[mechanism] = partial(ScramServer, SCRAM_MECHANISMS[mechanism],
                                           partial(credentials.get, mechanism), partial(credentials.token, mechanism))
        elif mechanism == OAUTHBEARER:
            factories[mechanism] = partial(OAuthBearerServer, _oauthbearer_validator(config, listener))
        else:
            raise ConfigError(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms",
                              f"SASL mechanism {mechanism} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and "
                              f"OAUTHBEARER with unsecured tokens are)")
    if not factories:
        raise ConfigError("sasl.enabled.mechanisms", f"no SASL mechanism is enabled on listener {listener}")
    return SaslListenerConfig(
        factories, config.listener_value(listener, "sasl.server.max.receive.size"),
        {m: config.listener_value(listener, "connections.max.reauth.ms", m) for m in factories})


def listener_security(config: KafkaConfig, endpoint: EndPoint, credentials: CredentialCache) -> ListenerSecurity:
    """Build (and check) one listener's TLS context and SASL mechanisms; ConfigError names a bad key."""
    protocol = endpoint.security_protocol
    listener = endpoint.listener_name
    factory = SslFactory.for_server(SslSettings.for_listener(config, listener),
                                    validate_handshakes=listener == config.inter_broker_listener_name) \
        if protocol.endswith("SSL") else None
    try:
        mapper = SslPrincipalMapper(config.listener_value(listener, "ssl.principal.mapping.rules"))
    except ValueError as exc:
        raise ConfigError("ssl.principal.mapping.rules", str(exc)) from None
    sasl = _sasl_config(config, listener, credentials) if protocol.startswith("SASL_") else None
    return ListenerSecurity(endpoint, factory, mapper, sasl, config.get("connection.failed.authentication.delay.ms"))
