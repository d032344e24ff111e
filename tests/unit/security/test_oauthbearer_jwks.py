"""KIP-768's validation of signed OAUTHBEARER tokens against a JWKS, as Kafka 3.9's
OAuthBearerValidatorCallbackHandler validates them (PyJWT in place of jose4j)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from broker.security import oauthbearer_jwks
from broker.security.oauthbearer import InvalidToken, OAuthBearerServer, client_first_message
from broker.security.oauthbearer_jwks import JwksSettings, JwksValidator, read_jwks


def _key_pair(kid: str) -> tuple[rsa.RSAPrivateKey, dict[str, object]]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    return private, {**public, "kid": kid, "use": "sig", "alg": "RS256"}


KEY_A, JWK_A = _key_pair("a")
KEY_B, JWK_B = _key_pair("b")


def _token(key: rsa.RSAPrivateKey = KEY_A, kid: str = "a", **claims: object) -> str:
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 300, "scope": "kafka other", **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="RS256", headers={"kid": kid})


def _validator(tmp_path: Path, **settings: object) -> JwksValidator:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [JWK_A]}))
    validator = JwksValidator(JwksSettings(f"file:{jwks}", **settings))  # type: ignore[arg-type]
    validator.start()
    return validator


def test_a_signed_token_names_its_principal_scope_and_expiry(tmp_path: Path) -> None:
    validator = _validator(tmp_path)
    token = validator.validate(_token())
    assert (token.principal_name, token.scope) == ("alice", frozenset({"kafka", "other"}))
    assert abs(token.lifetime_ms - (time.time() + 300) * 1000) < 5_000
    server = OAuthBearerServer(validator)
    assert server.evaluate(client_first_message(_token(scope=["x"]))) == b"" and server.authorization_id == "alice"


def test_tokens_kafka_refuses_are_refused(tmp_path: Path) -> None:
    validator = _validator(tmp_path, clock_skew_s=30, expected_audience=("kafka-brokers",), expected_issuer="idp")
    good = {"aud": "kafka-brokers", "iss": "idp"}
    assert validator.validate(_token(**good)).principal_name == "alice"
    assert validator.validate(_token(**good, exp=int(time.time()) - 10)).principal_name == "alice"  # within skew
    refused = [
        _token(KEY_B, "a", **good),  # signed by another key
        _token(**good, exp=int(time.time()) - 60),  # expired
        _token(**good, iat=None),  # no iat
        _token(**good, exp=None),  # no exp
        _token(**good, nbf=int(time.time()) + 600),  # not yet valid
        _token(aud="others", iss="idp"),
        _token(aud="kafka-brokers", iss="elsewhere"),
        _token(**good, sub=""),
        jwt.encode({"sub": "alice", "iat": 1, "exp": 2**40}, "s" * 32, algorithm="HS256", headers={"kid": "a"}),
        jwt.encode({"sub": "alice", "iat": 1, "exp": 2**40}, None, algorithm="none"),
        "not.a.token",
    ]
    for value in refused:
        with pytest.raises(InvalidToken):
            validator.validate(value)
    server = OAuthBearerServer(validator)
    assert json.loads(server.evaluate(client_first_message(refused[0]))) == {"status": "invalid_token"}


def test_a_rotated_in_key_is_fetched_when_a_token_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oauthbearer_jwks, "MISSING_KEY_REFRESH_INTERVAL_S", 0.0)
    validator = _validator(tmp_path)
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [JWK_A, JWK_B]}))  # the provider rotates key b in
    token = _token(KEY_B, "b")
    with pytest.raises(InvalidToken, match="no JWKS key"):
        validator.validate(token)  # not known yet: the refresher is woken
    deadline = time.monotonic() + 5
    while True:
        try:
            assert validator.validate(token).principal_name == "alice"
            break
        except InvalidToken:
            assert time.monotonic() < deadline, "the rotated key never arrived"
            time.sleep(0.05)
    validator.stop()


def test_keys_not_meant_for_signatures_are_left_out(tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [JWK_A, {**JWK_B, "use": "enc"}]}))
    assert sorted(read_jwks(f"file:{jwks}")) == ["a"]
    with pytest.raises(ValueError, match="must be file:"):
        read_jwks("ftp://idp/jwks")
