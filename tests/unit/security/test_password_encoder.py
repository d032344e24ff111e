"""Dynamic password configs encrypted in ZooKeeper as Kafka encrypts them."""

from __future__ import annotations

import pytest

from broker.admin.dynamic_broker_config import DynamicBrokerConfig, is_password_config
from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.security.password_encoder import PasswordEncoder, PasswordEncoderError

# What a Kafka 3.9 broker with password.encoder.secret=top-secret stored in /config/brokers/0 for
# listener.name.plaintext.plain.sasl.jaas.config=secret-value (read from its ZooKeeper).
KAFKA_ENCODED = (
    "initializationVector:gvF5cVhjr+SZ9lw1hDTSTA==,keyLength:128,salt:6Z2hu6B4ndMdTHgjOV9br3nmY48WBmcMr55xTBIyCyeQ"
    "OTqiKMpK5JudA7o3aSh7KlqVumOUZfCWigKl11LFenDKO3PuKp9Pga5uykuwOG09J9Hz3bFyn5FD4QFXLVb7KrLw1OeaXvH2+uFlahUMi6uR/g"
    "AYZIzB+MGZI+HM+MLzCzu/Nbb3fmSHFLw60zh/Y9XmoVgHBZtkmvgA5iHYBdmABMgopwU00T7LN/E48yVEev0rsT/D5T37mvhyciWPkJqMim"
    "B4aWnNyzKBZzLzQwNOizA81uPlq3hMmzW/MK38JVU06ywSjt6Boak4hX2VNQqBHLYTzw6JXZj2HNfeZQ==,keyFactoryAlgorithm:PBKDF2W"
    "ithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096,passwordLength:12,encryptedPassword:GEKvQOf"
    "f+idpUfMYM6uVHA==")
JAAS = "listener.name.plaintext.plain.sasl.jaas.config"


def test_what_kafka_encrypted_is_decrypted_and_what_we_encrypt_comes_back() -> None:
    encoder = PasswordEncoder("top-secret")
    assert encoder.decode(KAFKA_ENCODED) == "secret-value"
    encoded = encoder.encode("pässwörd €")
    fields = dict(entry.rsplit(":", 1) for entry in encoded.split(","))
    assert set(fields) == {"initializationVector", "keyLength", "salt", "keyFactoryAlgorithm", "cipherAlgorithm",
                           "iterations", "passwordLength", "encryptedPassword"}
    assert (fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"], fields["passwordLength"]) == (
        "PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding", "10")
    assert encoder.decode(encoded) == "pässwörd €" and encoder.encode("x") != encoder.encode("x")  # salted
    assert PasswordEncoder("top-secret", "PBKDF2WithHmacSHA1", key_length=256).decode(encoded) == "pässwörd €"
    with pytest.raises(PasswordEncoderError, match="Password could not be decoded"):
        PasswordEncoder("another secret").decode(KAFKA_ENCODED)
    with pytest.raises(PasswordEncoderError, match="Password could not be decoded"):
        encoder.decode(KAFKA_ENCODED.replace("passwordLength:12", "passwordLength:11"))


def _dyn(**props: str) -> DynamicBrokerConfig:
    return DynamicBrokerConfig(KafkaConfig({"broker.id": "0", "zookeeper.connect": "localhost:2181", **props}))


def test_zookeeper_keeps_passwords_encrypted_and_refuses_them_without_a_secret() -> None:
    assert is_password_config(JAAS) and is_password_config("ssl.keystore.password")
    assert not is_password_config("listener.name.ssl.ssl.keystore.location")
    with pytest.raises(PasswordEncoderError, match="^Password encoder secret not configured$"):
        _dyn().to_persistent({JAAS: "x"}, per_broker=True)
    dyn = _dyn(**{"password.encoder.secret": "top-secret"})
    with pytest.raises(PasswordEncoderError, match="^Password config can be defined only at broker level$"):
        dyn.to_persistent({"sasl.jaas.config": "x"}, per_broker=False)
    stored = dyn.to_persistent({JAAS: "secret-value", "num.io.threads": "4"}, per_broker=True)
    assert stored["num.io.threads"] == "4" and "secret-value" not in stored[JAAS]
    assert dyn.from_persistent(stored) == {JAAS: "secret-value", "num.io.threads": "4"}
    assert dyn.from_persistent({JAAS: KAFKA_ENCODED}) == {JAAS: "secret-value"}
    # one that cannot be decoded is left out (Kafka logs it and ignores it)
    assert _dyn(**{"password.encoder.secret": "other"}).from_persistent({JAAS: KAFKA_ENCODED, "a.b": "c"}) == \
        {"a.b": "c"}
    assert dyn.apply("0", stored) and dyn.per_broker[JAAS] == "secret-value"


def test_a_new_secret_re_encrypts_what_the_old_one_encrypted() -> None:
    dyn = _dyn(**{"password.encoder.secret": "new", "password.encoder.old.secret": "top-secret"})
    fresh = dyn.to_persistent({"listener.name.ssl.ssl.key.password": "k"}, per_broker=True)
    updated = dyn.reencoded_passwords({JAAS: KAFKA_ENCODED, **fresh, "num.io.threads": "4"})
    assert updated is not None and updated["num.io.threads"] == "4"
    assert updated["listener.name.ssl.ssl.key.password"] == fresh["listener.name.ssl.ssl.key.password"]
    assert dyn.password_encoder is not None and dyn.password_encoder.decode(updated[JAAS]) == "secret-value"
    assert dyn.reencoded_passwords(updated) is None  # nothing left under the old secret


def test_encoder_settings_are_checked_at_start_up() -> None:
    with pytest.raises(ConfigError, match="password.encoder.secret: .*AES/GCM/NoPadding is not supported"):
        _dyn(**{"password.encoder.secret": "s", "password.encoder.cipher.algorithm": "AES/GCM/NoPadding"})
    with pytest.raises(ConfigError, match="password.encoder.iterations"):
        _dyn(**{"password.encoder.secret": "s", "password.encoder.iterations": "10"})
