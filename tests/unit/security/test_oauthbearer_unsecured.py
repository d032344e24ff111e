"""SASL/OAUTHBEARER's pure parts: the client's first message and the unsecured token checks, as
Kafka 3.9's OAuthBearerSaslServer and OAuthBearerUnsecuredValidatorCallbackHandler make them."""
from __future__ import annotations

import base64
import json

import pytest

from broker.security.oauthbearer import (
    InvalidToken,
    OAuthBearerServer,
    UnsecuredValidator,
    client_first_message,
    parse_client_first_message,
    unsecured_token,
)
from broker.security.sasl_mechanism import SaslAuthenticationError, SaslError

NOW_S = 1_800_000_000


def _jws(claims: dict[str, object], header: dict[str, object] | None = None, signature: str = "") -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part(header or {'alg': 'none'})}.{part(claims)}.{signature}"


def test_the_first_message_carries_authzid_token_and_extensions() -> None:
    message = b"n,a=alice,\x01auth=Bearer abc.def.\x01traceId=42\x01\x01"
    assert parse_client_first_message(message) == ("alice", "abc.def.", {"traceId": "42"})
    assert parse_client_first_message(client_first_message("x.y.")) == ("", "x.y.", {})
    for bad in (b"n,,auth=Bearer x\x01\x01", b"n,,\x01auth=Basic x.y.\x01\x01", b"n,,\x01traceId=1\x01\x01",
                b"n,,\x01auth=Bearer x y\x01\x01"):
        with pytest.raises(SaslError):
            parse_client_first_message(bad)


def test_the_unsecured_validator_checks_claims_as_kafkas_does() -> None:
    validator = UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka",
                                    "unsecuredValidatorAllowableClockSkewMs": "1000"})
    now_ms = NOW_S * 1000
    good = {"sub": "alice", "iat": NOW_S, "exp": NOW_S + 60, "scope": ["kafka", "other"]}
    token = validator.validate(_jws(good), now_ms)
    assert (token.principal_name, token.lifetime_ms, token.scope) == ("alice", now_ms + 60_000, {"kafka", "other"})
    assert validator.validate(_jws({**good, "scope": "kafka"}), now_ms).scope == {"kafka"}
    assert validator.validate(_jws({**good, "exp": NOW_S + 0.5}), now_ms).principal_name == "alice"  # within skew
    refused = {
        "no exp": {k: v for k, v in good.items() if k != "exp"},
        "expired": {**good, "iat": NOW_S - 60, "exp": NOW_S - 2},
        "issued in the future": {**good, "iat": NOW_S + 2},
        "no principal": {k: v for k, v in good.items() if k != "sub"},
        "blank principal": {**good, "sub": " "},
        "principal not a string": {**good, "sub": 7},
        "exp not a number": {**good, "exp": "soon"},
    }
    for claims in refused.values():
        with pytest.raises(InvalidToken):
            validator.validate(_jws(claims), now_ms)
    for value in (_jws(good, {"alg": "HS256"}), _jws(good, signature="sig"), "a.b", "x..y", "!!!.???."):
        with pytest.raises(InvalidToken):
            validator.validate(value, now_ms)
    with pytest.raises(InvalidToken) as caught:
        validator.validate(_jws({**good, "scope": ["other"]}), now_ms)
    assert caught.value.scope == "[kafka]"


def test_a_refused_token_gets_rfc_7628s_error_then_fails_on_the_clients_ack() -> None:
    server = OAuthBearerServer(UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka"}))
    expired = _jws({"sub": "alice", "exp": 1})
    assert json.loads(server.evaluate(client_first_message(expired))) == {"status": "invalid_token"}
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        server.evaluate(b"\x01")
    server = OAuthBearerServer(UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka"}))
    unscoped = unsecured_token({"unsecuredLoginStringClaim_sub": "alice"})
    assert json.loads(server.evaluate(client_first_message(unscoped))) == {"status": "insufficient_scope",
                                                                           "scope": "[kafka]"}
    assert not server.complete


def test_an_accepted_token_names_the_principal_and_its_expiry() -> None:
    server = OAuthBearerServer(UnsecuredValidator({}))
    token = unsecured_token({"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginLifetimeSeconds": "120",
                             "unsecuredLoginListClaim_scope": "|a|b", "unsecuredLoginNumberClaim_n": "3"})
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["scope"] == ["a", "b"] and claims["n"] == 3 and claims["exp"] - claims["iat"] == pytest.approx(120)
    assert server.evaluate(client_first_message(token)) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expiration_ms == round(claims["exp"] * 1000)
    other = OAuthBearerServer(UnsecuredValidator({}))
    with pytest.raises(SaslAuthenticationError, match="different from the token's principal name"):
        other.evaluate(f"n,a=bob,\x01auth=Bearer {token}\x01\x01".encode())
    with pytest.raises(ValueError, match="no principal"):
        unsecured_token({"unsecuredLoginStringClaim_name": "x"})


def test_a_listener_refuses_to_start_without_jaas_or_with_another_validator() -> None:
    """Kafka needs the listener's OAUTHBEARER JAAS config; KIP-768's validator needs its JWKS; a
    callback handler we cannot honour stops start-up instead of letting its tokens be judged
    by other rules."""
    from broker.config import KafkaConfig
    from broker.config_defs import ConfigError
    from broker.network.channel_builder import listener_security
    from broker.security.credential_cache import CredentialCache

    base = {"zookeeper.connect": "zk:2181", "listeners": "SASL_PLAINTEXT://:9092",
            "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}
    endpoint = KafkaConfig(base).listeners[0]
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            'unsecuredLoginStringClaim_sub="admin";')
    with pytest.raises(ConfigError, match="no JAAS config"):
        listener_security(KafkaConfig(base), endpoint, CredentialCache())
    configured = {**base, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas}
    assert listener_security(KafkaConfig(configured), endpoint, CredentialCache()).sasl is not None
    handler_key = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    oidc = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    with pytest.raises(ConfigError, match="needs the JWKS URL"):
        listener_security(KafkaConfig({**configured, handler_key: oidc}), endpoint, CredentialCache())
    with pytest.raises(ConfigError, match="cannot read the JWKS file"):
        listener_security(KafkaConfig({**configured, handler_key: oidc,
                                       "sasl.oauthbearer.jwks.endpoint.url": "file:/nonexistent/jwks.json"}),
                          endpoint, CredentialCache())
    with pytest.raises(ConfigError, match="is not supported"):
        listener_security(KafkaConfig({**configured, handler_key: "com.example.MyValidator"}), endpoint,
                          CredentialCache())


def test_brokers_log_in_to_each_other_with_unsecured_tokens_or_an_identity_providers() -> None:
    import base64
    import json

    from broker.config import KafkaConfig
    from broker.config_defs import ConfigError
    from broker.security.client_security import ClientSecurity

    props = {"zookeeper.connect": "zk:2181", "listeners": "SASL_PLAINTEXT://:9092",
             "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
             "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
             "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                                 'unsecuredLoginStringClaim_sub="admin";'}
    security = ClientSecurity.inter_broker(KafkaConfig(props))
    assert security.sasl_mechanism == "OAUTHBEARER" and security.oauth_token is not None
    payload = security.oauth_token().split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"] == "admin"
    oidc_login = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
    with pytest.raises(ConfigError, match="needs the token endpoint"):
        ClientSecurity.inter_broker(KafkaConfig({**props, "sasl.login.callback.handler.class": oidc_login}))
    with pytest.raises(ConfigError, match="is not supported"):
        ClientSecurity.inter_broker(KafkaConfig({**props, "sasl.login.callback.handler.class": "com.example.Login"}))
