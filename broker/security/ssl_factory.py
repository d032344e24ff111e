"""SSLContexts from Kafka's ``ssl.*`` settings (Kafka's DefaultSslEngineFactory), for one listener.

``SslFactory`` holds one side's context (a listener's server side, the inter-broker client side)
and rebuilds it when a dynamic update changes the keystore or truststore settings, or names an
unchanged keystore file whose contents changed, with Kafka's checks: the new certificate keeps
the old one's DN (unless ``ssl.allow.dn.changes``) and its SubjectAltNames (unless
``ssl.allow.san.changes``), a keystore can be neither added nor removed, a truststore not added.
Connections already open keep the context they were made with, as in Kafka.

Keystores: ``PEM`` (a file with the private key and certificate chain, or the inline
``ssl.keystore.key`` / ``ssl.keystore.certificate.chain``), ``PKCS12`` (read with
``cryptography``) and Java's ``JKS``, Kafka's default type (``java_keystore``; a PKCS12 file
given as JKS is read, as Java reads it). Truststores: the same types, PEM also inline
(``ssl.truststore.certificates``).
Python's ``ssl`` loads keys only from files, so key material is passed through a private
temporary file that is removed at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.security.java_keystore import KeystoreError, is_jks, load_jks

log = logging.getLogger(__name__)

CLIENT_AUTH_MODES = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
_TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                 "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class SslSettings:
    """The ``ssl.*`` values in force on one listener."""

    listener: str
    keystore_type: str
    keystore_location: str | None
    keystore_password: str | None
    keystore_key: str | None
    keystore_certificate_chain: str | None
    key_password: str | None
    truststore_type: str
    truststore_location: str | None
    truststore_password: str | None
    truststore_certificates: str | None
    client_auth: str
    enabled_protocols: list[str]
    cipher_suites: list[str]
    endpoint_identification: str
    # Whether a dynamic keystore update may change the certificate's DN or drop SANs. Kafka's SslFactory
    # reads them from the config it was built with, so changing them takes a restart there too.
    allow_dn_changes: bool = False
    allow_san_changes: bool = False
    config_prefix: str | None = None  # how errors name the keys (else the listener's prefix)

    @classmethod
    def for_listener(cls, config: KafkaConfig, listener: str) -> SslSettings:
        def get(key: str) -> object:
            return config.listener_value(listener, key)

        return cls(listener, str(get("ssl.keystore.type")).upper(), get("ssl.keystore.location"),  # type: ignore[arg-type]
                   get("ssl.keystore.password"), get("ssl.keystore.key"),  # type: ignore[arg-type]
                   get("ssl.keystore.certificate.chain"), get("ssl.key.password"),  # type: ignore[arg-type]
                   str(get("ssl.truststore.type")).upper(), get("ssl.truststore.location"),  # type: ignore[arg-type]
                   get("ssl.truststore.password"), get("ssl.truststore.certificates"),  # type: ignore[arg-type]
                   str(get("ssl.client.auth")), list(get("ssl.enabled.protocols")),  # type: ignore[call-overload]
                   list(get("ssl.cipher.suites")), str(get("ssl.endpoint.identification.algorithm") or ""),  # type: ignore[call-overload]
                   bool(get("ssl.allow.dn.changes")), bool(get("ssl.allow.san.changes")))

    def key(self, name: str) -> str:
        """The config key to name in an error (the listener-prefixed one when the listener sets it)."""
        if self.config_prefix is not None:
            return self.config_prefix + name
        return f"listener.name.{self.listener.lower()}.{name}"


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="kafka-ssl-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


def _read(settings: SslSettings, key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(settings.key(key), f"cannot read {path}: {exc.strerror}") from None


@dataclass(frozen=True)
class _StoreContents:
    key: bytes  # the PEM private key, b"" when the store has none
    certificates: list[bytes]  # PEM: the key's chain (its own certificate first), or the trusted certificates
    alias: str | None


def _read_store(settings: SslSettings, kind: str, data: bytes, password: str | None) -> _StoreContents:
    """A ``kind`` ("keystore" or "truststore") of the JKS or PKCS12 type; as Java's JKS loader (since
    JDK 9), a PKCS12 file given as JKS is read as PKCS12."""
    store_type = settings.keystore_type if kind == "keystore" else settings.truststore_type
    key = f"ssl.{kind}.location"
    if store_type == "JKS" and is_jks(data):
        return _jks(settings, kind, data, password)
    if store_type in ("JKS", "PKCS12"):
        return _pkcs12(settings, key, data, password)
    raise ConfigError(settings.key(f"ssl.{kind}.type"),
                      f"{kind} type {store_type} is not supported; use JKS, PKCS12 or PEM")


def _pkcs12(settings: SslSettings, key: str, data: bytes, password: str | None) -> _StoreContents:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise ConfigError(settings.key(key), f"cannot load the PKCS12 store: {exc}") from None
    pem = serialization.Encoding.PEM
    private_key = b"" if store.key is None else store.key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    own = [] if store.cert is None else [store.cert]
    alias = None if store.cert is None else (store.cert.friendly_name or b"").decode() or None
    return _StoreContents(private_key, [c.certificate.public_bytes(pem) for c in own + store.additional_certs], alias)


def _jks(settings: SslSettings, kind: str, data: bytes, password: str | None) -> _StoreContents:
    """A keystore's first private key entry (its key recovered with ``ssl.key.password``, else the
    store password, as Kafka passes them to Java), or a truststore's certificates (Java trusts the
    certificate entries and each key entry's own certificate)."""
    from cryptography.hazmat.primitives import serialization

    try:
        entries = load_jks(data, password, settings.key_password, keys=kind == "keystore")
        if kind == "truststore":
            return _StoreContents(b"", [_pem_certificate(entry.certificates[0]) for entry in entries], None)
        entry = next((entry for entry in entries if entry.private_key is not None), None)
        if entry is None:
            return _StoreContents(b"", [], None)
        key = serialization.load_der_private_key(entry.private_key, None).private_bytes(  # type: ignore[arg-type]
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return _StoreContents(key, [_pem_certificate(der) for der in entry.certificates], entry.alias)
    except (KeystoreError, ValueError, TypeError) as exc:  # ValueError, TypeError: a key or certificate cryptography refuses
        raise ConfigError(settings.key(f"ssl.{kind}.location"), f"cannot load the JKS store: {exc}") from None


def _pem_certificate(der: bytes) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_der_x509_certificate(der).public_bytes(Encoding.PEM)


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> bool:
    """Load the key and certificate chain into ``context``; False when no keystore is configured."""
    if settings.keystore_key or settings.keystore_certificate_chain:
        if settings.keystore_type != "PEM":
            raise ConfigError(settings.key("ssl.keystore.type"), "inline keys need ssl.keystore.type=PEM")
        if not (settings.keystore_key and settings.keystore_certificate_chain):
            raise ConfigError(settings.key("ssl.keystore.key"),
                              "ssl.keystore.key and ssl.keystore.certificate.chain must be set together")
        material = (settings.keystore_certificate_chain + "\n" + settings.keystore_key).encode()
        password = settings.key_password
    elif settings.keystore_location:
        data = _read(settings, "ssl.keystore.location", settings.keystore_location)
        if settings.keystore_type == "PEM":
            material, password = data, settings.key_password
        else:
            contents = _read_store(settings, "keystore", data, settings.keystore_password)
            material, password = contents.key + b"".join(contents.certificates), None
    else:
        return False
    if settings.keystore_type == "PEM":
        _check_pem_key_password(settings, material, password)
    with _private_file(material) as path:
        try:
            context.load_cert_chain(path, password=password)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(settings.key("ssl.keystore.location"),
                              f"cannot load the key and certificate: {exc}") from None
    return True


def _check_pem_key_password(settings: SslSettings, material: bytes, password: str | None) -> None:
    """As Kafka's PEM keystore: ``ssl.key.password`` goes with an encrypted private key and only
    with one (and OpenSSL never prompts for a password on the broker's terminal)."""
    encrypted = b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in material or b"Proc-Type: 4,ENCRYPTED" in material
    if password and not encrypted:
        raise ConfigError(settings.key("ssl.key.password"), "is set but the PEM private key is not encrypted")
    if encrypted and not password:
        raise ConfigError(settings.key("ssl.key.password"), "the PEM private key is encrypted: its password is needed")


def _load_truststore(context: ssl.SSLContext, settings: SslSettings, purpose: ssl.Purpose) -> None:
    if settings.truststore_certificates:
        cadata = settings.truststore_certificates
    elif settings.truststore_location:
        data = _read(settings, "ssl.truststore.location", settings.truststore_location)
        if settings.truststore_type == "PEM":
            cadata = data.decode("ascii", "replace")
        else:
            cadata = b"".join(_read_store(settings, "truststore", data, settings.truststore_password).certificates
                              ).decode()
    else:
        context.load_default_certs(purpose)  # Java falls back to the JRE's cacerts
        return
    try:
        context.load_verify_locations(cadata=cadata)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(settings.key("ssl.truststore.location"), f"cannot load the trusted certificates: {exc}") from None


def openssl_cipher_name(java_name: str) -> str:
    """IANA/Java suite name -> OpenSSL's (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256)."""
    if "_WITH_" not in java_name:
        return java_name
    exchange, cipher = java_name.removeprefix("TLS_").removeprefix("SSL_").split("_WITH_", 1)
    parts = cipher.split("_")
    if parts[0] in ("AES", "CAMELLIA", "ARIA") and len(parts) > 1:
        parts[:2] = [parts[0] + parts[1]]
    if parts[0] == "CHACHA20" and parts[-1].startswith("SHA"):
        parts.pop()  # OpenSSL's CHACHA20 names carry no hash
    parts = [p for p in parts if p != "CBC"]  # nor the CBC mode
    prefix = "" if exchange == "RSA" else exchange.replace("_", "-") + "-"
    return prefix + "-".join(parts)


def _apply_protocols_and_ciphers(context: ssl.SSLContext, settings: SslSettings) -> None:
    versions = sorted(_TLS_VERSIONS[p] for p in settings.enabled_protocols if p in _TLS_VERSIONS)
    if not versions:
        raise ConfigError(settings.key("ssl.enabled.protocols"), "no supported TLS protocol is enabled")
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    tls12 = [openssl_cipher_name(c) for c in settings.cipher_suites if not c.startswith("TLS_AES_")
             and not c.startswith("TLS_CHACHA20_")]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise ConfigError(settings.key("ssl.cipher.suites"),
                              f"none of {', '.join(settings.cipher_suites)} is available") from None
        if len(tls12) == len(settings.cipher_suites) and context.maximum_version == ssl.TLSVersion.TLSv1_3:
            # Only TLS 1.2 suites were named: TLS 1.3 (whose suites Python cannot restrict) stays off.
            context.maximum_version = max(min(versions[-1], ssl.TLSVersion.TLSv1_2), versions[0])


def _base_context(protocol: int, settings: SslSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    _apply_protocols_and_ciphers(context, settings)
    return context


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The listener's server side: its keystore is required; client certificates per ssl.client.auth."""
    if settings.client_auth not in CLIENT_AUTH_MODES:
        raise ConfigError(settings.key("ssl.client.auth"), f"invalid value {settings.client_auth}")
    context = _base_context(ssl.PROTOCOL_TLS_SERVER, settings)
    if not _load_keystore(context, settings):
        raise ConfigError(settings.key("ssl.keystore.location"),
                          f"an SSL listener ({settings.listener}) needs a keystore")
    context.verify_mode = CLIENT_AUTH_MODES[settings.client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, settings, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """This broker connecting to another (inter-broker listener): verify the peer, present our keystore."""
    context = _base_context(ssl.PROTOCOL_TLS_CLIENT, settings)
    context.check_hostname = settings.endpoint_identification.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_keystore(context, settings)
    _load_truststore(context, settings, ssl.Purpose.SERVER_AUTH)
    return context


# --- dynamic reconfiguration (Kafka's SslFactory) ---------------------------------------------
# The SslSettings fields of Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: what a dynamic update applies at once.
RECONFIGURABLE_FIELDS = ("keystore_type", "keystore_location", "keystore_password", "keystore_key",
                         "keystore_certificate_chain", "key_password", "truststore_type", "truststore_location",
                         "truststore_password", "truststore_certificates")
_SAN_TYPES = {"OtherName": 0, "RFC822Name": 1, "DNSName": 2, "DirectoryName": 4, "UniformResourceIdentifier": 6,
              "IPAddress": 7, "RegisteredID": 8}  # Java's getSubjectAlternativeNames() type numbers


class SslReconfigurationError(ValueError):
    """A dynamic SSL update Kafka's SslFactory refuses (its message, as Kafka words it)."""


@dataclass(frozen=True)
class _KeystoreEntry:
    """The keystore's certificate as Kafka compares two keystores."""

    alias: str
    subject: object  # cryptography's x509.Name
    dn: str  # as Java's X500Principal prints it
    sans: tuple[tuple[int, str], ...]


def _keystore_entry(settings: SslSettings) -> _KeystoreEntry | None:
    from cryptography import x509

    alias = "kafka"  # Kafka's name for the entry of a PEM keystore
    if settings.keystore_certificate_chain:
        cert = x509.load_pem_x509_certificates(settings.keystore_certificate_chain.encode())[0]
    elif settings.keystore_location:
        data = _read(settings, "ssl.keystore.location", settings.keystore_location)
        if settings.keystore_type != "PEM":
            contents = _read_store(settings, "keystore", data, settings.keystore_password)
            if not contents.certificates:
                return None
            cert = x509.load_pem_x509_certificate(contents.certificates[0])
            alias = contents.alias or alias
        else:
            cert = x509.load_pem_x509_certificates(data)[0]
    else:
        return None
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        names = []
    sans = tuple((_SAN_TYPES.get(type(name).__name__, 0),
                  name.value.rfc4514_string() if isinstance(name, x509.DirectoryName) else str(name.value))
                 for name in names)
    dn = ", ".join(rdn.rfc4514_string() for rdn in reversed(cert.subject.rdns))
    return _KeystoreEntry(alias, cert.subject, dn, sans)


def _ensure_compatible(old: _KeystoreEntry, new: _KeystoreEntry, allow_dn_changes: bool,
                       allow_san_changes: bool) -> None:
    """Kafka's CertificateEntries.ensureCompatible (one entry per keystore here)."""
    if not allow_dn_changes and old.subject != new.subject and old.dn.lower() != new.dn.lower():
        raise SslReconfigurationError(
            f"Keystore DistinguishedName does not match:  existing={{alias={old.alias}, DN={old.dn}}}, "
            f"new={{alias={new.alias}, DN={new.dn}}}")
    if not allow_san_changes and not set(old.sans) <= set(new.sans):
        def shown(sans: tuple[tuple[int, str], ...]) -> str:
            return "[" + ", ".join(f"[{kind}, {value}]" for kind, value in sans) + "]"
        raise SslReconfigurationError(
            f"Keystore SubjectAltNames do not match:  existing={{alias={old.alias}, SAN={shown(old.sans)}}}, "
            f"new={{alias={new.alias}, SAN={shown(new.sans)}}}")


def _file_stamps(settings: SslSettings | None) -> tuple[int | None, int | None]:
    """When the keystore and truststore files last changed (an update naming them again reloads them then)."""
    def stamp(path: str | None) -> int | None:
        try:
            return os.stat(path).st_mtime_ns if path else None
        except OSError:
            return None
    return (None, None) if settings is None else (stamp(settings.keystore_location), stamp(settings.truststore_location))


def _reconfigurable(settings: SslSettings) -> tuple[object, ...]:
    return tuple(getattr(settings, name) for name in RECONFIGURABLE_FIELDS)


class SslFactory:
    """One side's SSLContext of a listener; ``context`` is what new connections use."""

    def __init__(self, context: ssl.SSLContext, settings: SslSettings | None = None, server: bool = True,
                 validate_handshakes: bool = False) -> None:
        self.context = context
        self.settings = settings  # None: a fixed context (not reconfigurable)
        self.server = server
        # The inter-broker listener's: an update must still let old and new settings talk to each
        # other (Kafka's SslEngineValidator), or the brokers would lock each other out.
        self.validate_handshakes = validate_handshakes
        self._stamps = _file_stamps(settings)

    @classmethod
    def for_server(cls, settings: SslSettings, validate_handshakes: bool = False) -> SslFactory:
        return cls(server_context(settings), settings, server=True, validate_handshakes=validate_handshakes)

    @classmethod
    def for_client(cls, settings: SslSettings) -> SslFactory:
        return cls(client_context(settings), settings, server=False)

    def validate_reconfiguration(self, settings: SslSettings, reload: bool = False) -> ssl.SSLContext | None:
        """The context ``settings`` call for, checked as Kafka checks it, or None when the current one
        stays (no reconfigurable setting changed and, with ``reload``, no file either). Raises
        SslReconfigurationError with Kafka's message."""
        current = self.settings
        if current is None or (_reconfigurable(settings) == _reconfigurable(current)
                               and not (reload and _file_stamps(settings) != self._stamps)):
            return None
        # Only the reconfigurable settings change; protocols, ciphers and client auth stay until a restart.
        settings = dataclasses.replace(current, **{name: getattr(settings, name) for name in RECONFIGURABLE_FIELDS})
        try:
            context = server_context(settings) if self.server else client_context(settings)
            old, new = _keystore_entry(current), _keystore_entry(settings)
            if old is None and new is not None:
                raise SslReconfigurationError("Cannot add SSL keystore to an existing listener for which no "
                                              "keystore was configured.")
            if old is not None and new is None:
                raise SslReconfigurationError("Cannot remove the SSL keystore from an existing listener for which "
                                              "a keystore was configured.")
            if old is not None and new is not None:
                _ensure_compatible(old, new, current.allow_dn_changes, current.allow_san_changes)
            if not _has_truststore(current) and _has_truststore(settings):
                raise SslReconfigurationError("Cannot add SSL truststore to an existing listener for which no "
                                              "truststore was configured.")
            if self.validate_handshakes:
                _validate_handshakes(current, settings)
        except ssl.SSLError as exc:
            raise _validation_failed(f"javax.net.ssl.SSLHandshakeException: {exc}") from None
        except SslReconfigurationError as exc:
            raise _validation_failed(f"org.apache.kafka.common.config.ConfigException: {exc}") from None
        except ConfigError as exc:
            log.error("Validation of dynamic config update of SSLFactory failed: %s", exc)
            if "keystore" in exc.key or "key.password" in exc.key:
                location = settings.keystore_location or "null"
                raise _validation_failed("org.apache.kafka.common.errors.InvalidConfigurationException: Failed to "
                                         f"load {settings.keystore_type} SSL keystore {location}") from None
            raise _validation_failed(f"org.apache.kafka.common.config.ConfigException: {exc}") from None
        except ValueError as exc:  # a certificate cryptography cannot read
            raise _validation_failed(f"org.apache.kafka.common.config.ConfigException: {exc}") from None
        return context

    def reconfigure(self, settings: SslSettings, reload: bool = False) -> bool:
        """Take ``settings`` if they call for a new context (see ``validate_reconfiguration``); True if so."""
        context = self.validate_reconfiguration(settings, reload)
        if context is None:
            return False
        assert self.settings is not None
        self.settings = dataclasses.replace(self.settings, **{name: getattr(settings, name)
                                                              for name in RECONFIGURABLE_FIELDS})
        self.context, self._stamps = context, _file_stamps(self.settings)
        log.info("Created new %s SSL engine builder with keystore %s truststore %s on listener %s",
                 "SERVER" if self.server else "CLIENT", self.settings.keystore_location or "(inline PEM)",
                 self.settings.truststore_location or "(inline or default)", self.settings.listener)
        return True


def _validate_handshakes(old: SslSettings, new: SslSettings) -> None:
    """Kafka's SslEngineValidator: a server with the old settings and a client with the new ones
    complete a TLS handshake, and the other way round (host names not checked); ssl.SSLError if not."""
    def client(settings: SslSettings) -> ssl.SSLContext:
        return client_context(dataclasses.replace(settings, endpoint_identification=""))
    _handshake(server_context(old), client(new))
    _handshake(server_context(new), client(old))


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """Both sides of a TLS handshake in memory."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    ends = [(client.wrap_bio(client_in, client_out), client_out, server_in),
            (server.wrap_bio(server_in, server_out, server_side=True), server_out, client_in)]
    done = [False, False]
    for _ in range(20):  # a handshake takes a few flights
        for i, (end, outgoing, peer_incoming) in enumerate(ends):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
            peer_incoming.write(outgoing.read())
        if all(done):
            return
    raise ssl.SSLError("the TLS handshake did not complete")


def _has_truststore(settings: SslSettings) -> bool:
    return bool(settings.truststore_location or settings.truststore_certificates)


def _validation_failed(cause: str) -> SslReconfigurationError:
    return SslReconfigurationError(f"Validation of dynamic config update of SSLFactory failed: {cause}")


# --- TLS to ZooKeeper (Kafka's zookeeper.ssl.*) -------------------------------------------------
def _store_type(declared: str | None, location: str | None) -> str:
    """ZooKeeper's X509Util: a store without a type has the one its file name says."""
    if declared:
        return declared.upper()
    name = (location or "").lower()
    return "PKCS12" if name.endswith((".p12", ".pfx")) else "PEM" if name.endswith(".pem") else "JKS"


def zookeeper_client_context(config: KafkaConfig) -> ssl.SSLContext | None:
    """The context of this broker's connection to ZooKeeper when ``zookeeper.ssl.client.enable``:
    its keystore (if any) presented, the server checked against the truststore, host names per
    ``zookeeper.ssl.endpoint.identification.algorithm``; ConfigError names a bad key."""
    if not config.get("zookeeper.ssl.client.enable"):
        return None
    for key in ("zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable"):
        if config.get(key):
            raise ConfigError(key, "certificate revocation checks are not supported for the ZooKeeper connection")
    keystore, truststore = config.get("zookeeper.ssl.keystore.location"), config.get("zookeeper.ssl.truststore.location")
    protocols = config.get("zookeeper.ssl.enabled.protocols") or [config.get("zookeeper.ssl.protocol")]
    settings = SslSettings(
        "ZooKeeper", _store_type(config.get("zookeeper.ssl.keystore.type"), keystore), keystore,
        config.get("zookeeper.ssl.keystore.password"), None, None,
        config.get("zookeeper.ssl.keystore.password"),  # ZooKeeper's PEM key password is the keystore's
        _store_type(config.get("zookeeper.ssl.truststore.type"), truststore), truststore,
        config.get("zookeeper.ssl.truststore.password"), None, "none", list(protocols),
        list(config.get("zookeeper.ssl.cipher.suites") or []),
        str(config.get("zookeeper.ssl.endpoint.identification.algorithm") or ""), config_prefix="zookeeper.")
    return client_context(settings)

