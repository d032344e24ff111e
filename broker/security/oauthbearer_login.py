"""This broker's OAUTHBEARER login at an identity provider (KIP-768's OAuthBearerLoginCallbackHandler).

With ``sasl.login.callback.handler.class`` set to Kafka's OAuthBearerLoginCallbackHandler on the
inter-broker listener, the broker gets its access token as Kafka's does: the OAuth client
credentials grant at ``sasl.oauthbearer.token.endpoint.url`` (a POST of
``grant_type=client_credentials`` and the JAAS ``scope``, HTTP Basic with the JAAS ``clientId``
and ``clientSecret``, each URL-encoded; ``access_token`` read from the JSON answer), retried
with exponential back-off from ``sasl.login.retry.backoff.ms`` while it has spent less than
``sasl.login.retry.backoff.max.ms``, or the token in a ``file:`` URL. The token is checked as
Kafka's LoginAccessTokenValidator checks it (a JWT with ``exp`` and a subject; the signature is
the brokers' business), and refreshed in the background when Kafka's ExpiringCredentialRefreshingLogin
would: at ``sasl.login.refresh.window.factor`` (plus jitter) of its lifetime, no sooner than
``sasl.login.refresh.min.period.seconds`` from now and no later than
``sasl.login.refresh.buffer.seconds`` before it expires.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import KafkaConfig
from broker.config_defs import ConfigError

log = logging.getLogger(__name__)

OIDC_LOGIN_CLASSES = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                      "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")
FAILED_REFRESH_RETRY_S = 10.0  # a refresh that failed is tried again this much later (while the token lasts)


class LoginError(Exception):
    """No token could be had (Kafka's LoginException)."""


class _Unretryable(LoginError):
    """The token endpoint refused the request itself (HTTP 4xx): trying again cannot help."""


@dataclass(frozen=True)
class OidcLoginSettings:
    token_endpoint_url: str
    client_id: str
    client_secret: str
    scope: str | None = None
    sub_claim: str = "sub"
    connect_timeout_ms: int | None = None
    read_timeout_ms: int | None = None
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10000
    refresh_window_factor: float = 0.8
    refresh_window_jitter: float = 0.05
    refresh_min_period_s: int = 60
    refresh_buffer_s: int = 300

    @classmethod
    def for_listener(cls, config: KafkaConfig, listener: str, mechanism: str,
                     jaas_options: Mapping[str, str]) -> OidcLoginSettings:
        """The listener's settings (``listener.name.<l>.<mechanism>.*`` first); ConfigError names what is missing."""
        def get(key: str) -> Any:
            return config.listener_value(listener, key, mechanism)

        prefix = f"listener.name.{listener.lower()}.{mechanism.lower()}."
        url = get("sasl.oauthbearer.token.endpoint.url")
        if not url:
            raise ConfigError(prefix + "sasl.oauthbearer.token.endpoint.url",
                              "the OAuthBearerLoginCallbackHandler needs the token endpoint")
        if not url.startswith("file:") and not (jaas_options.get("clientId") and jaas_options.get("clientSecret")):
            raise ConfigError(prefix + "sasl.jaas.config", "the OAuthBearerLoginCallbackHandler needs clientId and "
                                                           "clientSecret in the JAAS config for the token endpoint")
        return cls(url, jaas_options.get("clientId", ""), jaas_options.get("clientSecret", ""),
                   jaas_options.get("scope") or None, get("sasl.oauthbearer.sub.claim.name"),
                   get("sasl.login.connect.timeout.ms"), get("sasl.login.read.timeout.ms"),
                   get("sasl.login.retry.backoff.ms"), get("sasl.login.retry.backoff.max.ms"),
                   get("sasl.login.refresh.window.factor"), get("sasl.login.refresh.window.jitter"),
                   get("sasl.login.refresh.min.period.seconds"), get("sasl.login.refresh.buffer.seconds"))


# --- getting a token -----------------------------------------------------------------------------
def _request_once(settings: OidcLoginSettings) -> str:
    """One client credentials request; the access token."""
    credentials = f"{urllib.parse.quote(settings.client_id, safe='')}:{urllib.parse.quote(settings.client_secret, safe='')}"
    body = "grant_type=client_credentials"
    if settings.scope:
        body += "&scope=" + urllib.parse.quote(settings.scope, safe="")
    request = urllib.request.Request(settings.token_endpoint_url, data=body.encode(), method="POST", headers={
        "Accept": "application/json", "Cache-Control": "no-cache",
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": "Basic " + base64.b64encode(credentials.encode()).decode()})
    timeouts = [t for t in (settings.connect_timeout_ms, settings.read_timeout_ms) if t is not None]
    try:
        with urllib.request.urlopen(request, timeout=max(timeouts) / 1000 if timeouts else 30) as answer:  # noqa: S310
            text = answer.read().decode()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        error = _Unretryable if 400 <= exc.code < 500 and exc.code != 429 else LoginError
        raise error(f"the token endpoint {settings.token_endpoint_url} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise LoginError(f"the token endpoint {settings.token_endpoint_url} could not be reached: {exc}") from None
    try:
        token = json.loads(text)["access_token"]
    except (ValueError, KeyError, TypeError):
        raise _Unretryable("The token endpoint response did not contain an access_token value") from None
    if not isinstance(token, str) or not token.strip():
        raise _Unretryable("The token endpoint response access_token value must be non-null")
    return token.strip()


def retrieve_token(settings: OidcLoginSettings, sleep: Callable[[float], None] = time.sleep) -> str:
    """The token at the endpoint (retried as Kafka's HttpAccessTokenRetriever retries) or in the file."""
    url = settings.token_endpoint_url
    if url.startswith("file:"):
        try:
            with urllib.request.urlopen(url) as answer:  # noqa: S310 - a configured file URL
                return answer.read().decode().strip()
        except OSError as exc:
            raise LoginError(f"the token file {url} could not be read: {exc}") from None
    backoff_ms, waited_ms = settings.retry_backoff_ms, 0
    while True:
        try:
            return _request_once(settings)
        except _Unretryable:
            raise
        except LoginError as exc:
            if waited_ms + backoff_ms > settings.retry_backoff_max_ms:
                raise
            log.warning("%s; trying again in %d ms", exc, backoff_ms)
        sleep(backoff_ms / 1000)
        waited_ms += backoff_ms
        backoff_ms = min(backoff_ms * 2, settings.retry_backoff_max_ms)


@dataclass(frozen=True)
class LoginToken:
    value: str
    principal: str
    expires_ms: int
    issued_ms: int | None


def validate_login_token(value: str, sub_claim: str = "sub") -> LoginToken:
    """Kafka's LoginAccessTokenValidator: a JWT whose payload has ``exp`` and the subject claim."""
    parts = value.split(".")
    if len(parts) != 3:
        raise LoginError("Malformed JWT provided; expected three sections (header, payload, and signature)")
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        raise LoginError("Malformed JWT provided; the payload is not base64url-encoded JSON") from None
    if not isinstance(payload, dict):
        raise LoginError("Malformed JWT provided; the payload is not a JSON object")
    expires = payload.get("exp")
    if not isinstance(expires, (int, float)) or isinstance(expires, bool):
        raise LoginError("The token must contain an exp claim (a number)")
    subject = payload.get(sub_claim)
    if not isinstance(subject, str) or not subject.strip():
        raise LoginError(f"The token must contain a non-blank {sub_claim} claim")
    issued = payload.get("iat")
    issued_ms = int(issued * 1000) if isinstance(issued, (int, float)) and not isinstance(issued, bool) else None
    return LoginToken(value, subject, int(expires * 1000), issued_ms)


# --- keeping it fresh ----------------------------------------------------------------------------
def refresh_at_ms(token: LoginToken, now_ms: int, settings: OidcLoginSettings,
                  rng: Callable[[], float] = random.random) -> int:
    """When ExpiringCredentialRefreshingLogin refreshes ``token``."""
    share = settings.refresh_window_factor + settings.refresh_window_jitter * rng()
    if now_ms + 1000 * (settings.refresh_min_period_s + settings.refresh_buffer_s) > token.expires_ms:
        return now_ms + int((token.expires_ms - now_ms) * share)  # too short-lived for the margins
    start = token.issued_ms if token.issued_ms is not None else now_ms
    refresh = start + int((token.expires_ms - start) * share)
    refresh = max(refresh, now_ms + 1000 * settings.refresh_min_period_s)
    return min(refresh, token.expires_ms - 1000 * settings.refresh_buffer_s)


class OidcLogin:
    """The inter-broker login's current token, refreshed by a daemon thread."""

    def __init__(self, settings: OidcLoginSettings, retrieve: Callable[[OidcLoginSettings], str] = retrieve_token,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._retrieve = retrieve
        self._clock = clock
        self._token: LoginToken | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _login(self) -> LoginToken:
        token = validate_login_token(self._retrieve(self.settings), self.settings.sub_claim)
        log.info("Logged in at %s as %s; the token expires at %d", self.settings.token_endpoint_url,
                 token.principal, token.expires_ms)
        self._token = token
        return token

    def start(self) -> None:
        """The first token now (LoginError if none), then the refreshing thread."""
        self._login()
        self._thread = threading.Thread(target=self._run, name="oauthbearer-login-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def token(self) -> str:
        assert self._token is not None, "start() first"
        return self._token.value

    def _run(self) -> None:
        assert self._token is not None
        due_ms = refresh_at_ms(self._token, int(self._clock() * 1000), self.settings)
        while not self._stop.wait(max(0.0, due_ms / 1000 - self._clock())):
            try:
                due_ms = refresh_at_ms(self._login(), int(self._clock() * 1000), self.settings)
            except LoginError as exc:
                log.error("Refreshing the OAUTHBEARER login failed (the current token stays): %s", exc)
                due_ms = int((self._clock() + FAILED_REFRESH_RETRY_S) * 1000)
