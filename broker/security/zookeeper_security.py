"""How the broker authenticates to ZooKeeper and protects what it writes there, from what Kafka reads.

SASL comes from the JVM system properties Kafka users pass in ``KAFKA_OPTS``: the JAAS file of
``-Djava.security.auth.login.config``, its login context ``Client`` (``zookeeper.sasl.clientconfig``),
``zookeeper.sasl.client`` (true unless set) and ``zookeeper.sasl.client.username`` (the server's
service name). The context must use ZooKeeper's DigestLoginModule (DIGEST-MD5, through kazoo and
pure-sasl); Kerberos is refused at start-up, as on the listeners. TLS is ``zookeeper.ssl.*``
(``ssl_factory.zookeeper_client_context``). With ``zookeeper.set.acl`` the nodes the broker creates
get Kafka's secure ACLs (``coordination.zk_client.default_acls``), and as Kafka's KafkaServer the
broker refuses to start unless one of the two authenticates it, with Kafka's message.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from broker.config import KafkaConfig
from broker.security.jaas import JaasConfigError
from broker.security.jaas_context import LOGIN_CONFIG, jvm_system_properties, read_jaas_file
from broker.security.ssl_factory import zookeeper_client_context

SASL_CLIENT = "zookeeper.sasl.client"
LOGIN_CONTEXT = "zookeeper.sasl.clientconfig"
SERVICE_NAME = "zookeeper.sasl.client.username"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


class ZooKeeperSecurityError(Exception):
    """The ZooKeeper security settings stop start-up (Kafka's SecurityException or KafkaException)."""


@dataclass(frozen=True)
class ZooKeeperClientSecurity:
    ssl_context: ssl.SSLContext | None
    sasl_options: dict[str, str] | None  # kazoo's sasl_options
    secure_acls: bool  # zookeeper.set.acl


def zookeeper_client_security(config: KafkaConfig,
                              environ: Mapping[str, str] = os.environ) -> ZooKeeperClientSecurity:
    properties = jvm_system_properties(environ)
    sasl = zookeeper_sasl_options(properties)
    secure_acls = bool(config.get("zookeeper.set.acl"))
    if secure_acls and sasl is None and not _tls_client_auth(config):
        raise ZooKeeperSecurityError(
            "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at least "
            "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location was not "
            f"present and the verification of the JAAS login file failed {_describe(properties)}")
    return ZooKeeperClientSecurity(zookeeper_client_context(config), sasl, secure_acls)


def zookeeper_sasl_options(properties: Mapping[str, str]) -> dict[str, str] | None:
    """kazoo's SASL settings from the JAAS login context ZooKeeper's client would use; None when
    there is none (Kafka's JaasUtils.isZkSaslEnabled false)."""
    path = properties.get(LOGIN_CONFIG)
    if not path:
        return None
    context = properties.get(LOGIN_CONTEXT, "Client")
    try:
        modules = read_jaas_file(path).get(context)
    except (OSError, JaasConfigError) as exc:
        raise ZooKeeperSecurityError(f"Exception while loading Zookeeper JAAS login context "
                                     f"{_describe(properties)}: {exc}") from exc
    if not modules:
        return None
    if properties.get(SASL_CLIENT, "true").lower() != "true":
        raise ZooKeeperSecurityError(f"Exception while determining if ZooKeeper is secure {_describe(properties)}: "
                                     f"JAAS configuration is present, but system property {SASL_CLIENT} is set to "
                                     "false, which disables SASL in the ZooKeeper client")
    module = modules[0]
    if module.login_module != DIGEST_LOGIN_MODULE:
        raise ZooKeeperSecurityError(f"the ZooKeeper login context {context} uses {module.login_module}; only "
                                     f"{DIGEST_LOGIN_MODULE} (SASL DIGEST-MD5) is supported")
    if "username" not in module.options or "password" not in module.options:
        raise ZooKeeperSecurityError(f"the ZooKeeper login context {context} needs a username and a password")
    return {"mechanism": "DIGEST-MD5", "username": module.options["username"],
            "password": module.options["password"], "service": properties.get(SERVICE_NAME, "zookeeper")}


def _tls_client_auth(config: KafkaConfig) -> bool:
    """Kafka's zkTlsClientAuthEnabled: the three keys a TLS client certificate needs in Java."""
    return bool(config.get("zookeeper.ssl.client.enable") and config.get("zookeeper.clientCnxnSocket")
                and config.get("zookeeper.ssl.keystore.location"))


def _describe(properties: Mapping[str, str]) -> str:
    """Kafka's JaasUtils.zkSecuritySysConfigString."""
    return (f"[{LOGIN_CONFIG}={properties.get(LOGIN_CONFIG, 'null')}, "
            f"{SASL_CLIENT}={properties.get(SASL_CLIENT, 'default:true')}, "
            f"{LOGIN_CONTEXT}={properties.get(LOGIN_CONTEXT, 'default:Client')}]")
