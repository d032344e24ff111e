"""The broker's own OAUTHBEARER login at an identity provider (KIP-768's client credentials grant)."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from broker.security.oauthbearer_login import LoginError, LoginToken, OidcLogin, OidcLoginSettings, refresh_at_ms, \
    retrieve_token, validate_login_token
from tests.harness.identity_provider import IdentityProvider


@pytest.fixture
def provider(tmp_path: Path) -> IdentityProvider:  # type: ignore[misc]
    idp = IdentityProvider(tmp_path)
    idp.add_client("broker one", "s3cret:&=", "broker-1")
    yield idp
    idp.close()


def _settings(url: str, **changes: object) -> OidcLoginSettings:
    values: dict[str, object] = {"token_endpoint_url": url, "client_id": "broker one", "client_secret": "s3cret:&=",
                                 "scope": "kafka admin", "retry_backoff_ms": 10, "retry_backoff_max_ms": 100}
    values.update(changes)
    return OidcLoginSettings(**values)  # type: ignore[arg-type]


def test_the_client_credentials_grant_as_kafka_sends_it(provider: IdentityProvider) -> None:
    token = validate_login_token(retrieve_token(_settings(provider.token_endpoint)))
    assert token.principal == "broker-1" and token.expires_ms > time.time() * 1000
    sent = provider.requests[-1]
    # id and secret URL-encoded, then joined and base64-encoded (Kafka's HttpAccessTokenRetriever)
    assert sent["authorization"] == "Basic " + base64.b64encode(b"broker%20one:s3cret%3A%26%3D").decode()
    assert sent["form"] == {"grant_type": "client_credentials", "scope": "kafka admin"}
    assert sent["content_type"] == "application/x-www-form-urlencoded"


def test_an_unavailable_endpoint_is_retried_and_a_refusal_is_not(provider: IdentityProvider) -> None:
    provider.failures_to_serve = 2
    slept: list[float] = []
    assert retrieve_token(_settings(provider.token_endpoint), sleep=slept.append)
    assert slept == [0.01, 0.02] and len(provider.requests) == 3
    provider.failures_to_serve = 100
    with pytest.raises(LoginError, match="answered 503"):  # 10 + 20 + 40 ms spent, 80 more would pass 100
        retrieve_token(_settings(provider.token_endpoint), sleep=lambda _: None)
    provider.failures_to_serve, before = 0, len(provider.requests)
    with pytest.raises(LoginError, match="answered 401"):
        retrieve_token(_settings(provider.token_endpoint, client_secret="wrong"), sleep=lambda _: None)
    assert len(provider.requests) == before + 1


def test_a_token_in_a_file_and_the_tokens_kafka_refuses_to_log_in_with(provider: IdentityProvider,
                                                                       tmp_path: Path) -> None:
    path = tmp_path / "token.jwt"
    path.write_text(provider.token("from-file") + "\n")
    assert validate_login_token(retrieve_token(_settings(f"file:{path}"))).principal == "from-file"
    with pytest.raises(LoginError, match="expected three sections"):
        validate_login_token("not-a-jwt")
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    for payload, problem in ((b'{"sub":"x"}', "exp claim"), (b'{"exp":1}', "non-blank sub claim")):
        with pytest.raises(LoginError, match=problem):
            validate_login_token(f"{header}.{base64.urlsafe_b64encode(payload).rstrip(b'=').decode()}.")


def test_refreshes_happen_when_kafkas_refreshing_login_would_refresh() -> None:
    settings = _settings("file:/x")
    hour = LoginToken("t", "p", expires_ms=3_600_000, issued_ms=0)
    assert refresh_at_ms(hour, 0, settings, rng=lambda: 0.0) == 2_880_000  # 80% of its life
    assert refresh_at_ms(hour, 0, settings, rng=lambda: 1.0) == 3_060_000  # plus the full 5% jitter
    assert refresh_at_ms(hour, 3_010_000, settings, rng=lambda: 1.0) == 3_070_000  # min period 60 s from now
    assert refresh_at_ms(hour, 3_300_000, settings, rng=lambda: 0.0) == 3_300_000 + 240_000  # too close: 80% of rest
    three_days = LoginToken("t", "p", expires_ms=3 * 86_400_000, issued_ms=0)
    assert refresh_at_ms(three_days, 0, settings, rng=lambda: 0.0) == int(3 * 86_400_000 * 0.8)


def test_the_login_keeps_a_fresh_token(provider: IdentityProvider) -> None:
    provider.lifetime_s = 2  # shorter than the margins: refreshed at 80-85% of what is left
    login = OidcLogin(_settings(provider.token_endpoint, refresh_min_period_s=0, refresh_buffer_s=0))
    login.start()
    try:
        first = login.token()
        deadline = time.monotonic() + 10
        while login.token() == first:
            assert time.monotonic() < deadline, "no refresh"
            time.sleep(0.05)
        assert validate_login_token(login.token()).principal == "broker-1"
    finally:
        login.stop()
