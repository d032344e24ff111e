"""Kafka's JaasContext: the JAAS login modules a listener's SASL mechanism uses, wherever they are set.

As Kafka's ``JaasContext.loadServerContext``: the listener's ``sasl.jaas.config`` for the mechanism
first, else the static JAAS file Kafka users name with the JVM system property
``-Djava.security.auth.login.config`` in ``KAFKA_OPTS``: its ``<listener>.KafkaServer`` login context,
else ``KafkaServer``. A context lists one module per mechanism (PlainLoginModule's ``user_<name>``
entries, ScramLoginModule's, OAuthBearerLoginModule's options); the mechanism's own module is taken.
The broker's login to ZooKeeper reads the same file (``zookeeper_security``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasConfigError, JaasModule, \
    parse_jaas_config, parse_jaas_file
from broker.security.oauthbearer import OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE
from broker.security.sasl_mechanism import PLAIN
from broker.security.scram import SCRAM_MECHANISMS

LOGIN_CONFIG = "java.security.auth.login.config"
SERVER_CONTEXT = "KafkaServer"
LOGIN_MODULES = {PLAIN: PLAIN_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE,
                 **{mechanism: SCRAM_LOGIN_MODULE for mechanism in SCRAM_MECHANISMS}}


def jvm_system_properties(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The ``-Dkey=value`` settings of ``KAFKA_OPTS``, the JVM options Kafka's scripts pass on."""
    return {key: value for key, _, value in (token[2:].partition("=")
                                             for token in shlex.split(environ.get("KAFKA_OPTS", ""))
                                             if token.startswith("-D"))}


def read_jaas_file(path: str) -> dict[str, list[JaasModule]]:
    """The login contexts of the JAAS file at ``path`` (Java also takes a ``file:`` URL)."""
    with open(path.removeprefix("file:"), encoding="utf-8") as file:
        return parse_jaas_file(file.read())


def server_login_modules(config: KafkaConfig, listener: str, mechanism: str,
                         environ: Mapping[str, str] = os.environ) -> tuple[list[JaasModule], str] | None:
    """The login modules of ``mechanism`` on ``listener`` and where they were found (for messages),
    None when neither the config nor a JAAS file has any; ConfigError when one cannot be read."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_value(listener, "sasl.jaas.config", mechanism)
    if text is not None:
        try:
            return parse_jaas_config(text), key
        except JaasConfigError as exc:
            raise ConfigError(key, str(exc)) from None
    path = jvm_system_properties(environ).get(LOGIN_CONFIG)
    if not path:
        return None
    try:
        contexts = read_jaas_file(path)
    except (OSError, JaasConfigError) as exc:
        raise ConfigError(LOGIN_CONFIG, f"the JAAS file {path} cannot be read: {exc}") from None
    for name in (f"{listener.lower()}.{SERVER_CONTEXT}", SERVER_CONTEXT):
        modules = contexts.get(name)
        if modules:
            own = [module for module in modules if module.login_module == LOGIN_MODULES.get(mechanism)]
            return own or modules, f"the {name} context of {path}"
    return None
