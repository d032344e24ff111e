"""Java's JKS keystores, the type Kafka's ``ssl.keystore.type`` and ``ssl.truststore.type`` default to.

The format (OpenJDK's JavaKeyStore): magic 0xFEEDFEED, version 1 or 2, then per entry a tag
(1: private key, 2: trusted certificate), an alias, a timestamp, and either the protected key with
its certificate chain or one certificate; the file ends with a SHA-1 digest over the store password
(UTF-16BE), "Mighty Aphrodite" and everything before it. Private keys are PKCS#8 encrypted with
Sun's KeyProtector: SHA-1 of password and salt chained into a keystream, XORed, then checked with
a SHA-1 of password and key. Pure code: bytes in, DER out.

No maintained Python library reads JKS (pyjks was last released in 2020 and builds a C extension
for JCEKS ciphers this broker does not need), so this one does.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field

JKS_MAGIC = b"\xfe\xed\xfe\xed"
PRIVATE_KEY_ENTRY, TRUSTED_CERT_ENTRY = 1, 2
# 1.3.6.1.4.1.42.2.17.1.1, Sun's proprietary key protection algorithm, DER-encoded
KEY_PROTECTOR_OID = bytes.fromhex("060a2b060104012a02110101")
_SALT_LENGTH = _DIGEST_LENGTH = 20


class KeystoreError(ValueError):
    """The store cannot be read; the text is Java's where Java has one."""


@dataclass
class JksEntry:
    alias: str
    private_key: bytes | None  # PKCS#8 PrivateKeyInfo, DER (a private key entry)
    certificates: list[bytes] = field(default_factory=list)  # DER: the chain, or the trusted certificate


def is_jks(data: bytes) -> bool:
    return data[:4] == JKS_MAGIC


def load_jks(data: bytes, store_password: str | None, key_password: str | None = None, *,
             keys: bool = True) -> list[JksEntry]:
    """Every entry of the JKS store ``data``. The digest is checked when ``store_password`` is given
    (Java skips it without one); private keys are recovered with ``key_password``, else the store's,
    unless ``keys`` is False (a truststore: only the certificates are wanted)."""
    if not is_jks(data) or len(data) < 12 + _DIGEST_LENGTH:
        raise KeystoreError("Invalid keystore format")
    body, digest = data[:-_DIGEST_LENGTH], data[-_DIGEST_LENGTH:]
    if store_password is not None:
        expected = hashlib.sha1(store_password.encode("utf-16-be") + b"Mighty Aphrodite" + body).digest()
        if not hmac.compare_digest(expected, digest):
            raise KeystoreError("Keystore was tampered with, or password was incorrect")
    reader = _Reader(body)
    version = reader.u4(4)
    if version not in (1, 2):
        raise KeystoreError(f"Invalid keystore format: version {version}")
    entries = []
    for _ in range(reader.u4()):
        tag, alias = reader.u4(), reader.utf()
        reader.take(8)  # the creation date
        if tag == PRIVATE_KEY_ENTRY:
            protected = reader.take(reader.u4())
            chain = [reader.certificate(version) for _ in range(reader.u4())]
            password = key_password if key_password is not None else store_password
            if keys and password is None:
                raise KeystoreError(f"the private key {alias} needs a password")
            entries.append(JksEntry(alias, _recover_key(protected, password) if keys and password else None, chain))
        elif tag == TRUSTED_CERT_ENTRY:
            entries.append(JksEntry(alias, None, [reader.certificate(version)]))
        else:
            raise KeystoreError(f"Unrecognized keystore entry: {tag}")
    return entries


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise KeystoreError("Invalid keystore format: truncated")
        chunk = self.data[self.position:self.position + size]
        self.position += size
        return chunk

    def u4(self, skip: int = 0) -> int:
        self.take(skip)
        return struct.unpack(">I", self.take(4))[0]

    def utf(self) -> str:
        """Java's DataInput.readUTF (modified UTF-8; aliases are plain text in practice)."""
        return self.take(struct.unpack(">H", self.take(2))[0]).decode("utf-8", "replace")

    def certificate(self, version: int) -> bytes:
        if version == 2 and self.utf() != "X.509":
            raise KeystoreError("Invalid keystore format: only X.509 certificates are read")
        return self.take(self.u4())


def _recover_key(protected: bytes, password: str) -> bytes:
    """Sun's KeyProtector.recover: the PKCS#8 key inside an EncryptedPrivateKeyInfo."""
    algorithm, encrypted = _encrypted_private_key_info(protected)
    if algorithm != KEY_PROTECTOR_OID:
        raise KeystoreError("Unsupported key protection algorithm")
    if len(encrypted) < _SALT_LENGTH + _DIGEST_LENGTH:
        raise KeystoreError("Cannot recover key")
    salt, cipher, check = encrypted[:_SALT_LENGTH], encrypted[_SALT_LENGTH:-_DIGEST_LENGTH], encrypted[-_DIGEST_LENGTH:]
    secret = password.encode("utf-16-be")
    stream, block = bytearray(), salt
    while len(stream) < len(cipher):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    key = (int.from_bytes(cipher, "big") ^ int.from_bytes(stream[:len(cipher)], "big")).to_bytes(len(cipher), "big")
    if not hmac.compare_digest(hashlib.sha1(secret + key).digest(), check):
        raise KeystoreError("Cannot recover key")
    return key


def _encrypted_private_key_info(der: bytes) -> tuple[bytes, bytes]:
    """(the algorithm's OID as DER, the encrypted data) of SEQUENCE { SEQUENCE { OID, ... }, OCTET STRING }."""
    outer, _ = _tlv(der, 0, 0x30)
    algorithm, after = _tlv(outer, 0, 0x30)
    data, _ = _tlv(outer, after, 0x04)
    oid_length = 2 + algorithm[1] if len(algorithm) > 1 and algorithm[0] == 0x06 else 0
    return algorithm[:oid_length], data


def _tlv(der: bytes, position: int, tag: int) -> tuple[bytes, int]:
    """The value of the DER element of ``tag`` at ``position`` and the position after it."""
    if position + 2 > len(der) or der[position] != tag:
        raise KeystoreError("Invalid encrypted private key")
    length, position = der[position + 1], position + 2
    if length & 0x80:
        size = length & 0x7F
        length = int.from_bytes(der[position:position + size], "big")
        position += size
    if position + length > len(der):
        raise KeystoreError("Invalid encrypted private key")
    return der[position:position + length], position + length
