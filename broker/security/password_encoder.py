"""PasswordEncoder: dynamic password configs as Kafka stores them in ZooKeeper.

A ZooKeeper-mode Kafka broker refuses a dynamic password config (``ssl.keystore.password``,
``sasl.jaas.config``, ... per broker) unless ``password.encoder.secret`` is set, and stores it
encrypted with it (Kafka's EncryptingPasswordEncoder): a key derived from the secret with
PBKDF2 (``password.encoder.keyfactory.algorithm``, by default PBKDF2WithHmacSHA512, a 256-byte
random salt, ``password.encoder.iterations``, ``password.encoder.key.length`` bits), the UTF-8
password encrypted with ``password.encoder.cipher.algorithm`` (AES/CBC/PKCS5Padding, a random IV),
and everything needed to decode it written next to it as ``name:value`` pairs joined by commas,
base64 for bytes. The format is Kafka's, so either broker decodes what the other wrote.
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from broker.config import KafkaConfig
from broker.config_defs import ConfigError

CBC = "AES/CBC/PKCS5Padding"
KEY_FACTORIES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA1": "sha1", "PBKDF2WithHmacSHA256": "sha256"}
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
SALT_BYTES = 256


class PasswordEncoderError(ValueError):
    """A password that cannot be encoded or decoded (Kafka's ConfigException)."""


def _java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class PasswordEncoder:
    def __init__(self, secret: str, key_factory_algorithm: str | None = None, cipher_algorithm: str = CBC,
                 key_length: int = 128, iterations: int = 4096) -> None:
        if cipher_algorithm != CBC:
            raise PasswordEncoderError(f"password.encoder.cipher.algorithm {cipher_algorithm} is not supported "
                                       f"(only {CBC})")
        key_factory = key_factory_algorithm or DEFAULT_KEY_FACTORY
        if key_factory not in KEY_FACTORIES:
            raise PasswordEncoderError(f"password.encoder.keyfactory.algorithm {key_factory} is not supported "
                                       f"({', '.join(KEY_FACTORIES)} are)")
        if key_length not in (128, 192, 256):
            raise PasswordEncoderError(f"password.encoder.key.length {key_length} is not an AES key length")
        self._secret = secret
        self.key_factory_algorithm = key_factory
        self.key_length = key_length
        self.iterations = iterations

    def _key(self, key_factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        if key_factory not in KEY_FACTORIES:
            raise PasswordEncoderError(f"unknown key factory algorithm {key_factory}")
        return hashlib.pbkdf2_hmac(KEY_FACTORIES[key_factory], self._secret.encode(), salt, iterations,
                                   key_length // 8)

    def encode(self, password: str) -> str:
        salt, iv = os.urandom(SALT_BYTES), os.urandom(16)
        padder = padding.PKCS7(128).padder()
        plain = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(self._key(self.key_factory_algorithm, salt, self.iterations,
                                                    self.key_length)), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(plain) + encryptor.finalize()
        fields = {
            "initializationVector": base64.b64encode(iv).decode(), "keyLength": str(self.key_length),
            "salt": base64.b64encode(salt).decode(), "keyFactoryAlgorithm": self.key_factory_algorithm,
            "cipherAlgorithm": CBC, "iterations": str(self.iterations),
            "passwordLength": str(_java_length(password)), "encryptedPassword": base64.b64encode(encrypted).decode(),
        }
        return ",".join(f"{name}:{value}" for name, value in fields.items())

    def decode(self, encoded: str) -> str:
        """The password; PasswordEncoderError("Password could not be decoded") as Kafka says it."""
        try:
            fields = dict(_csv_entry(entry) for entry in encoded.split(","))
            if fields["cipherAlgorithm"] != CBC:
                raise PasswordEncoderError(f"cipher algorithm {fields['cipherAlgorithm']} is not supported")
            key = self._key(fields["keyFactoryAlgorithm"], base64.b64decode(fields["salt"]),
                            int(fields["iterations"]), int(fields["keyLength"]))
            decryptor = Cipher(algorithms.AES(key), modes.CBC(base64.b64decode(fields["initializationVector"]))) \
                .decryptor()
            plain = decryptor.update(base64.b64decode(fields["encryptedPassword"])) + decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(plain) + unpadder.finalize()).decode()
        except (KeyError, ValueError) as exc:
            raise PasswordEncoderError(f"Password could not be decoded: {exc}") from None
        if _java_length(password) != int(fields["passwordLength"]):
            raise PasswordEncoderError("Password could not be decoded, sanity check of length failed")
        return password


def _csv_entry(entry: str) -> tuple[str, str]:
    """One ``name:value`` of Kafka's Csv.parseCsvMap (split at the last colon, trimmed)."""
    name, _, value = entry.rpartition(":")
    return name.strip(), value.strip()


def password_encoders(config: KafkaConfig) -> tuple[PasswordEncoder | None, PasswordEncoder | None]:
    """The encoder of ``password.encoder.secret`` and of ``password.encoder.old.secret`` (None where
    unset), with the broker's ``password.encoder.*`` settings; ConfigError names a bad one."""
    def encoder(key: str) -> PasswordEncoder | None:
        secret = config.get(key)
        if not secret:
            return None
        try:
            return PasswordEncoder(secret, config.get("password.encoder.keyfactory.algorithm"),
                                   config.get("password.encoder.cipher.algorithm"),
                                   config.get("password.encoder.key.length"), config.get("password.encoder.iterations"))
        except PasswordEncoderError as exc:
            raise ConfigError(key, str(exc)) from None
    return encoder("password.encoder.secret"), encoder("password.encoder.old.secret")
