"""SASL/OAUTHBEARER (KIP-255, RFC 7628) with Kafka's default unsecured JWS tokens.

What a Kafka 3.9 broker does when OAUTHBEARER is enabled and no server callback handler is set:
the client's first message ``n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A...]^A`` carries
an unsecured JWS (``alg`` "none", no signature) whose claims are checked as
OAuthBearerUnsecuredValidatorCallbackHandler checks them, with its JAAS options
``unsecuredValidatorPrincipalClaimName`` (default ``sub``), ``unsecuredValidatorScopeClaimName``
(``scope``), ``unsecuredValidatorRequiredScope`` and ``unsecuredValidatorAllowableClockSkewMs``: the
principal claim a non-blank string, ``exp`` present and not past, ``iat`` (if any) not in the
future and before ``exp``, the required scope granted. A token that fails gets RFC 7628's error
challenge (``{"status":"invalid_token"}``, or ``insufficient_scope`` with the scope); the client
answers with a lone ^A and authentication fails. The token's expiry bounds the session
(re-authentication, KIP-368). Extensions are accepted, as that handler accepts every one.

``unsecured_token`` is the other side, OAuthBearerUnsecuredLoginCallbackHandler: the token this
broker presents to others from its own ``unsecuredLogin*`` options.

Not suitable for production, as Kafka says of the same handler: anyone can mint such a token.
KIP-768's OIDC validation (signed tokens checked against a JWKS endpoint) is not here.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any, Protocol

from broker.security.sasl_mechanism import SaslAuthenticationError, SaslError, SaslServer

OAUTHBEARER = "OAUTHBEARER"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_VALIDATOR_CLASS = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                             "OAuthBearerUnsecuredValidatorCallbackHandler")
SEPARATOR = "\x01"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
# Kafka's OAuthBearerClientInitialResponse pattern (Java's [a&&[^b]] written as a lookahead here).
_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>(?:(?![=,])[\x01-\x7F]|=2C|=3D)+))?," + SEPARATOR
    + r"(?P<kvpairs>(?:" + _KEY + "=" + _VALUE + SEPARATOR + r")*)" + SEPARATOR, re.S)
_AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_.a-zA-Z0-9]+)")


class ValidToken(Protocol):
    principal_name: str
    lifetime_ms: int  # the expiry, ms since the epoch


class TokenValidator(Protocol):
    def validate(self, value: str, now_ms: int | None = None) -> ValidToken: ...


class InvalidToken(Exception):
    """The token fails validation; ``scope`` is the required scope when that is what it lacks."""

    def __init__(self, message: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope


class UnsecuredToken:
    """A validated unsecured JWS: its principal, scope and lifetime (ms since the epoch)."""

    def __init__(self, value: str, principal_claim: str, scope_claim: str) -> None:
        if ".." in value:
            raise InvalidToken("Malformed compact serialization contains '..'")
        splits = value.split(".")
        if len(splits) != 3:
            raise InvalidToken("Unsecured JWS compact serializations must have 3 dot-separated "
                               "Base64URL-encoded values")
        header, self.claims = _json_object(splits[0]), _json_object(splits[1])
        if str(header.get("alg")) != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise InvalidToken("Unsecured JWS must not contain a digital signature")
        self.value = value
        self.scope = self._scope(scope_claim)
        expiration = self._claim("exp", (int, float))
        if expiration is None:
            raise InvalidToken("No expiration time in JWT")
        self.lifetime_ms = round(expiration * 1000)
        principal = self._claim(principal_claim, str)
        if principal is None or not principal.strip():
            raise InvalidToken(f"No principal name in JWT claim: {principal_claim}")
        self.principal_name: str = principal
        issued_at = self._claim("iat", (int, float))
        self.start_time_ms = None if issued_at is None else round(issued_at * 1000)

    def _claim(self, name: str, kind: type | tuple[type, ...]) -> Any:
        value = self.claims.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, kind):
            raise InvalidToken(f"The '{name}' claim was not of type {'String' if kind is str else 'Number'}")
        return value

    def _scope(self, claim: str) -> set[str]:
        value = self.claims.get(claim)
        if isinstance(value, str):
            return {value.strip()} if value.strip() else set()
        if isinstance(value, list):
            return {str(item).strip() for item in value if str(item).strip()}
        if value is None:
            return set()
        raise InvalidToken(f"The '{claim}' claim was not of type List")


def _json_object(split: str) -> dict[str, Any]:
    try:
        decoded = base64.urlsafe_b64decode(split + "=" * (-len(split) % 4))
    except (binascii.Error, ValueError):
        raise InvalidToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(decoded)
    except (UnicodeDecodeError, ValueError):
        raise InvalidToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("malformed JSON")
    return value


class UnsecuredValidator:
    """OAuthBearerUnsecuredValidatorCallbackHandler with its ``unsecuredValidator*`` JAAS options."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip() or "0"
        try:
            self.clock_skew_ms = int(skew)
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs is not a number: {skew}") from None
        if self.clock_skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")

    def validate(self, value: str, now_ms: int | None = None) -> UnsecuredToken:
        token = UnsecuredToken(value, self.principal_claim, self.scope_claim)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        skew = self.clock_skew_ms
        if token.start_time_ms is not None and token.start_time_ms > now + skew:
            raise InvalidToken(f"The Issued At value ({token.start_time_ms} ms) is in the future (now = {now} ms)")
        if now >= token.lifetime_ms + skew:
            raise InvalidToken(f"The indicated time ({now} ms) is at or after the Expiration Time value "
                               f"({token.lifetime_ms} ms)")
        if token.start_time_ms is not None and token.start_time_ms >= token.lifetime_ms:
            raise InvalidToken(f"The Expiration Time ({token.lifetime_ms} ms) is not after the Issued At time "
                               f"({token.start_time_ms} ms)")
        missing = [s for s in self.required_scope if s not in token.scope]
        if missing:
            # Kafka reports the required scope as Java prints a list: [a, b]
            raise InvalidToken(f"The provided scope ({sorted(token.scope)}) was missing a required scope "
                               f"({missing[0]})", scope=f"[{', '.join(self.required_scope)}]")
        return token


def parse_client_first_message(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(authorization id, token, extensions) of the client's first message (Kafka's
    OAuthBearerClientInitialResponse); SaslError where Kafka throws SaslException."""
    match = _CLIENT_FIRST.fullmatch(message.decode("utf-8", "replace"))
    if match is None:
        raise SaslError("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in match.group("kvpairs").split(SEPARATOR):
        if pair:
            key, _, value = pair.partition("=")
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match.group("scheme").lower() != "bearer":
        raise SaslError(f"Invalid scheme in OAUTHBEARER client first message: {auth_match.group('scheme')}")
    return match.group("authzid") or "", auth_match.group("token"), properties


class OAuthBearerServer(SaslServer):
    """Kafka's OAuthBearerSaslServer over a token validator (unsecured, or JWKS in oauthbearer_jwks)."""

    mechanism_name = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        super().__init__()
        self._validator = validator
        self._error: str | None = None
        self.extensions: dict[str, str] = {}

    def evaluate(self, token: bytes) -> bytes:
        if token == SEPARATOR.encode() and self._error is not None:
            raise SaslAuthenticationError(self._error)  # the client acknowledged our error challenge
        self._error = None
        authzid, value, extensions = parse_client_first_message(token)
        try:
            validated = self._validator.validate(value)
        except InvalidToken as exc:
            error: dict[str, str] = {"status": "insufficient_scope" if exc.scope is not None else "invalid_token"}
            if exc.scope is not None:
                error["scope"] = exc.scope
            self._error = json.dumps(error, separators=(", ", ":"))
            return self._error.encode()
        if authzid and authzid != validated.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({validated.principal_name})")
        self.extensions = extensions
        self.authorization_id = validated.principal_name
        self.credential_expiration_ms = validated.lifetime_ms
        self.complete = True
        return b""


def unsecured_token(options: Mapping[str, str], now_s: float | None = None) -> str:
    """OAuthBearerUnsecuredLoginCallbackHandler's token from ``unsecuredLogin*`` options:
    ``unsecuredLoginStringClaim_<name>``, ``unsecuredLoginNumberClaim_<name>``,
    ``unsecuredLoginListClaim_<name>`` (first character the separator), the principal claim
    (``unsecuredLoginPrincipalClaimName``, default ``sub``) required, ``iat`` now and ``exp``
    ``unsecuredLoginLifetimeSeconds`` (default 3600) later."""
    # Whole milliseconds, as Kafka's handler writes them: a validator on this host never sees the
    # token issued in its future.
    now = math.floor((time.time() if now_s is None else now_s) * 1000) / 1000
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "").strip() or "sub"
    lifetime = float(options.get("unsecuredLoginLifetimeSeconds", "").strip() or "3600")
    claims: dict[str, Any] = {"iat": now, "exp": round(now + lifetime, 3)}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key[len("unsecuredLoginStringClaim_"):]] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            number = float(value)
            claims[key[len("unsecuredLoginNumberClaim_"):]] = int(number) if number.is_integer() else number
        elif key.startswith("unsecuredLoginListClaim_") and value:
            claims[key[len("unsecuredLoginListClaim_"):]] = [item for item in value[1:].split(value[0]) if item]
    if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim].strip():
        raise ValueError(f"the unsecured login options name no principal: unsecuredLoginStringClaim_{principal_claim}")

    def encode(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{encode({'alg': 'none'})}.{encode(claims)}."


def client_first_message(token: str) -> bytes:
    """The initial response this broker sends as an OAUTHBEARER client."""
    return f"n,,{SEPARATOR}auth=Bearer {token}{SEPARATOR}{SEPARATOR}".encode()
