"""OAUTHBEARER tokens signed by an identity provider, checked against its JWKS (KIP-768).

What Kafka 3.9's OAuthBearerValidatorCallbackHandler checks, with its broker settings (also per
listener and mechanism, ``listener.name.<l>.oauthbearer.<key>``):

- ``sasl.oauthbearer.jwks.endpoint.url``: where the provider's public keys are, ``https://`` or
  ``file:``; fetched at start-up and every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and
  early when a token names a key id not seen yet (retried with
  ``sasl.oauthbearer.jwks.endpoint.retry.backoff[.max].ms``), on a thread of its own so that no
  login waits for the network;
- the signature (any asymmetric algorithm the key supports, never ``none``), ``exp`` and ``iat``
  required, ``nbf`` honoured, ``sasl.oauthbearer.clock.skew.seconds`` of leeway;
- ``sasl.oauthbearer.expected.audience`` (one of them in ``aud``) and
  ``sasl.oauthbearer.expected.issuer`` when set;
- the principal from ``sasl.oauthbearer.sub.claim.name`` (``sub``), the scope from
  ``sasl.oauthbearer.scope.claim.name`` (``scope``: a space-separated string or a list).

PyJWT does the JOSE work (jose4j's in Kafka).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import jwt

from broker.security.oauthbearer import InvalidToken

log = logging.getLogger(__name__)

# Kafka 3.9's class, and the name it had in 3.1-3.3 (still accepted by Kafka).
JWKS_VALIDATOR_CLASSES = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                          "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
MISSING_KEY_REFRESH_INTERVAL_S = 10.0  # a token with an unknown key id refreshes the keys at most this often
FETCH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class JwksSettings:
    url: str
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    clock_skew_s: int = 30
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"


@dataclass(frozen=True)
class ValidatedToken:
    principal_name: str
    lifetime_ms: int  # the expiry, ms since the epoch
    scope: frozenset[str]


def read_jwks(url: str) -> dict[str, Any]:
    """The key set at ``url`` (file: or http(s)), by key id (a key without one under "")."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        text = Path(parsed.path).read_text()
    elif parsed.scheme in ("http", "https"):
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:  # noqa: S310 - a configured URL
            text = answer.read().decode()
    else:
        raise ValueError(f"the JWKS URL must be file:, http: or https:, not {url}")
    keys: dict[str, Any] = {}
    for entry in json.loads(text).get("keys", []):
        if entry.get("use", "sig") != "sig":
            continue
        try:
            keys[entry.get("kid", "")] = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError) as exc:
            log.warning("Skipping a JWKS key of %s that cannot be used (%s): %s", url, entry.get("kid"), exc)
    return keys


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: ``validate`` as the unsecured validator's."""

    def __init__(self, settings: JwksSettings, fetch: Callable[[str], dict[str, Any]] = read_jwks) -> None:
        self.settings = settings
        self._fetch = fetch
        self._keys: dict[str, Any] = {}
        self._last_fetch = 0.0
        self._wakeup = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Fetch the keys once (a file that cannot be read stops start-up), then keep them fresh."""
        try:
            self._refresh()
        except OSError as exc:
            if urlparse(self.settings.url).scheme == "file":
                raise ValueError(f"cannot read the JWKS file {self.settings.url}: {exc}") from None
            log.error("Cannot fetch the JWKS from %s yet (%s); retrying in the background", self.settings.url, exc)
        self._thread = threading.Thread(target=self._run, name="oauthbearer-jwks-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wakeup.set()

    def _refresh(self) -> None:
        keys = self._fetch(self.settings.url)
        self._keys = keys
        self._last_fetch = time.monotonic()
        log.info("Fetched %d JWKS keys from %s: %s", len(keys), self.settings.url, sorted(keys))

    def _run(self) -> None:
        backoff = self.settings.retry_backoff_ms / 1000
        period = self.settings.refresh_ms / 1000 if self.settings.refresh_ms > 0 else None  # 0: only on demand
        while not self._stopped:
            self._wakeup.wait(period)
            self._wakeup.clear()
            if self._stopped:
                return
            try:
                self._refresh()
                backoff = self.settings.retry_backoff_ms / 1000
            except (OSError, ValueError) as exc:
                log.warning("Refreshing the JWKS from %s failed (%s); retrying in %.1f s", self.settings.url, exc,
                            backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, self.settings.retry_backoff_max_ms / 1000)
                self._wakeup.set()

    def _key(self, header: dict[str, Any]) -> Any:
        keys = self._keys
        kid = header.get("kid")
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        key = keys.get(kid or "")
        if key is None:
            if time.monotonic() - self._last_fetch > MISSING_KEY_REFRESH_INTERVAL_S:
                self._wakeup.set()  # a key the provider may have just rotated in
            raise InvalidToken(f"no JWKS key with id {kid!r}")
        return key

    def validate(self, value: str, now_ms: int | None = None) -> ValidatedToken:
        settings = self.settings
        try:
            header = jwt.get_unverified_header(value)
            if header.get("alg") not in ALGORITHMS:
                raise InvalidToken(f"the algorithm {header.get('alg')!r} is not allowed")
            claims = jwt.decode(
                value, self._key(header).key, algorithms=[header["alg"]], leeway=settings.clock_skew_s,
                audience=list(settings.expected_audience) or None, issuer=settings.expected_issuer,
                options={"require": ["exp", "iat"], "verify_iat": False,
                         "verify_aud": bool(settings.expected_audience)})
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from None
        principal = claims.get(settings.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"the {settings.sub_claim} claim holds no principal name")
        scope = claims.get(settings.scope_claim)
        scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope] if isinstance(scope, list) else []
        return ValidatedToken(principal.strip(), round(float(claims["exp"]) * 1000), frozenset(scopes))
